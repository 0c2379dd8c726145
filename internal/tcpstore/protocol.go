package tcpstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire protocol, from torch/csrc/distributed/c10d/TCPStore.cpp (v1.13 to v2.1) and
// TCPStoreBackend.cpp and TCPStoreLibUvBackend.cpp (v2.2 and later). Integers are in the
// host's byte order, which is little-endian on every machine torch supports:
//
//	request   = query-type:u8 args
//	string    = length:u64 bytes        (keys and values alike)
//	key list  = count:u64 string*       (CHECK, WAIT, MULTI_GET)
//
// SET key value, APPEND key value and MULTI_SET count (key value)* have no reply.
// COMPARE_SET key expected desired and GET key reply a string; ADD key delta:i64, GETNUMKEYS
// and DELETE_KEY key reply an i64; CHECK replies one byte (0 ready, 1 not ready); WAIT
// replies STOP_WAITING (0) once every key exists, which may be much later; CANCEL_WAIT
// (sent by a 2.x client whose wait timed out) replies WAIT_CANCELED (1), after any
// STOP_WAITING already due; PING nonce:u32 replies the nonce. The server knows nothing of
// the client's timeouts: a client gives up on its own and, before 2.2, never uses that
// connection again.

// op is what a request asks, whatever its number in the client's dialect.
type op uint8

const (
	opValidate op = iota
	opSet
	opCompareSet
	opGet
	opAdd
	opCheck
	opWait
	opNumKeys
	opWatchKey
	opDelete
	opAppend
	opMultiGet
	opMultiSet
	opCancelWait
	opPing
)

var opNames = [...]string{"VALIDATE", "SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT",
	"GETNUMKEYS", "WATCH_KEY", "DELETE_KEY", "APPEND", "MULTI_GET", "MULTI_SET", "CANCEL_WAIT", "PING"}

func (o op) String() string { return opNames[o] }

// dialect is a client's numbering of the query types.
type dialect int

const (
	// unknown: no request read yet.
	unknown dialect = iota
	// legacy is torch 1.13 to 2.1: SET is 0; WATCH_KEY (7) exists (1.13's callback
	// client), APPEND to CANCEL_WAIT (9-12) came in 2.0.
	legacy
	// current is torch 2.2 and later: VALIDATE (0) with validationMagic comes first on
	// every connection; WATCH_KEY is gone, PING (13) is new.
	current
)

func (d dialect) String() string {
	return [...]string{"unknown", "torch 1.13-2.1", "torch 2.2+"}[d]
}

// validationMagic is the number a 2.2+ client sends with VALIDATE
// (c10d::detail::validationMagicNumber).
const validationMagic = 0x3C85F7CE

var (
	legacyOps  = []op{opSet, opCompareSet, opGet, opAdd, opCheck, opWait, opNumKeys, opWatchKey, opDelete, opAppend, opMultiGet, opMultiSet, opCancelWait}
	currentOps = []op{opValidate, opSet, opCompareSet, opGet, opAdd, opCheck, opWait, opNumKeys, opDelete, opAppend, opMultiGet, opMultiSet, opCancelWait, opPing}
)

// Replies of one byte.
const (
	checkReady    = 0
	checkNotReady = 1
	stopWaiting   = 0
	waitCanceled  = 1
)

// errProtocol marks a request the server refuses: the connection is closed.
var errProtocol = errors.New("protocol error")

// decode maps a query type byte to its op in dialect d.
func decode(d dialect, b byte) (op, error) {
	table := currentOps
	if d == legacy {
		table = legacyOps
	}
	if int(b) >= len(table) {
		return 0, fmt.Errorf("%w: unknown query type %d for a %s client (queue operations are not supported)", errProtocol, b, d)
	}
	return table[b], nil
}

// sniff tells a connection's dialect from its first bytes without consuming any but a
// 2.2+ client's VALIDATE: a legacy client's first request is never 0 followed by the magic
// number (that would be a SET of a key of 1 GB, beyond any Limits).
func sniff(r *bufio.Reader) (dialect, error) {
	head, err := r.Peek(1)
	if err != nil {
		return unknown, err
	}
	if head[0] != 0 {
		return legacy, nil
	}
	head, err = r.Peek(5)
	if err != nil {
		return unknown, err
	}
	if binary.LittleEndian.Uint32(head[1:]) != validationMagic {
		return legacy, nil
	}
	_, err = r.Discard(5)
	return current, err
}

// reader reads a request's arguments within the server's Limits.
type reader struct {
	r      *bufio.Reader
	limits *Limits
}

func (rd reader) u64() (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(rd.r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func (rd reader) u32() (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(rd.r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// bytes reads a length-prefixed string of at most max bytes. Memory grows with what
// arrives, not with the length a client announces.
func (rd reader) bytes(max int, what string) ([]byte, error) {
	n, err := rd.u64()
	if err != nil {
		return nil, err
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: a %s of %d bytes; the most is %d (tcpstore.Limits)", errProtocol, what, n, max)
	}
	b, err := io.ReadAll(io.LimitReader(rd.r, int64(n)))
	if err == nil && uint64(len(b)) < n {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

func (rd reader) key() (string, error) {
	b, err := rd.bytes(rd.limits.MaxKeyLen, "key")
	return string(b), err
}

func (rd reader) value() ([]byte, error) { return rd.bytes(rd.limits.MaxValueLen, "value") }

// keys reads a key list.
func (rd reader) keys() ([]string, error) {
	n, err := rd.u64()
	if err != nil {
		return nil, err
	}
	if n > uint64(rd.limits.MaxKeysPerRequest) {
		return nil, fmt.Errorf("%w: %d keys in one request; the most is %d (tcpstore.Limits)", errProtocol, n, rd.limits.MaxKeysPerRequest)
	}
	keys := make([]string, 0, min(n, 1024))
	for range n {
		k, err := rd.key()
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// Replies.

func u64Bytes(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func appendString(b, s []byte) []byte {
	return append(binary.LittleEndian.AppendUint64(b, uint64(len(s))), s...)
}
