// Package tcpstore is the server side of PyTorch's c10d TCPStore: the key-value store that
// torch.distributed's env:// rendezvous and its process groups (gloo, NCCL) meet in.
//
// The launcher hosts one before any rank starts, as torchrun's agent does, and gives the
// ranks MASTER_ADDR:MASTER_PORT pointing at it with TORCHELASTIC_USE_AGENT_STORE=True, so
// that every rank is a client: none hosts the store, and none meets the client's 1-second
// connect retry because it started before rank 0 listened.
//
// It speaks both dialects of the wire protocol (see protocol.go): torch 1.13 to 2.1
// ("legacy": SET is query 0) and torch 2.2 and later ("current": every connection first
// sends VALIDATE, query 0, with a magic number, and SET is query 1). A connection's
// dialect is told from its first bytes. Every buffer is bounded (Limits); a client that
// passes a bound is logged and disconnected, which the client sees as a store error.
package tcpstore
