package envtest_test

import (
	"testing"

	"github.com/trainyard/trainyard/internal/testbinary"
)

// binary is the trainyard binary the tests run as a user (and as a pod) would.
var binary string

func TestMain(m *testing.M) {
	testbinary.Main(m, &binary)
}
