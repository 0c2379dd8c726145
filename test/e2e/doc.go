// Package e2e runs the trainyard binary as a user would: bad input, GPU assignment with a
// stand-in nvidia-smi, signals, and real distributed PyTorch training on Fashion-MNIST.
//
// The binary is built once per test run, or taken from $TRAINYARD_BIN. Tests that need
// PyTorch skip when /usr/bin/python3 (or $TRAINYARD_PYTHON) cannot import torch; `make
// test` installs it, so they run in CI.
package e2e
