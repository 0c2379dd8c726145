package tcpstore

import (
	"fmt"
	"strconv"
)

// Limits bound what clients may make the server hold. A zero field takes its default.
type Limits struct {
	// MaxKeyLen is the longest key, in bytes (default 8 KiB, torch 2.x's own bound).
	MaxKeyLen int
	// MaxValueLen is the longest value, in bytes (default 8 MiB, torch 2.x's own bound).
	MaxValueLen int
	// MaxKeysPerRequest bounds a CHECK, WAIT, MULTI_GET or MULTI_SET (default 128 Ki,
	// torch 2.x's own bound).
	MaxKeysPerRequest int
	// MaxKeys is the most keys the store holds at once (default 1 Mi).
	MaxKeys int
	// MaxBytes is the most bytes of keys and values the store holds at once (default 1 GiB).
	MaxBytes int64
	// MaxConns is the most client connections at once (default 16 Ki; a torch 1.13 client
	// opens two per TCPStore).
	MaxConns int
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxKeyLen, 8<<10)
	def(&l.MaxValueLen, 8<<20)
	def(&l.MaxKeysPerRequest, 128<<10)
	def(&l.MaxKeys, 1<<20)
	def(&l.MaxConns, 16<<10)
	if l.MaxBytes <= 0 {
		l.MaxBytes = 1 << 30
	}
	return l
}

// keyspace is the store's data and who waits on it. The server's mutex guards it.
type keyspace struct {
	limits  *Limits
	vals    map[string][]byte
	bytes   int64
	waiters map[string][]*conn // key -> connections whose WAIT lacks it
}

func newKeyspace(limits *Limits) keyspace {
	return keyspace{limits: limits, vals: map[string][]byte{}, waiters: map[string][]*conn{}}
}

// set stores val under key and wakes the connections waiting for it.
func (ks *keyspace) set(key string, val []byte) error {
	old, had := ks.vals[key]
	grow := int64(len(val) - len(old))
	if !had {
		grow += int64(len(key))
		if len(ks.vals) >= ks.limits.MaxKeys {
			return fmt.Errorf("%w: the store holds %d keys, its most (tcpstore.Limits); key %q refused", errProtocol, len(ks.vals), key)
		}
	}
	if ks.bytes+grow > ks.limits.MaxBytes {
		return fmt.Errorf("%w: the store holds %d bytes; %d more for key %q would pass its most, %d (tcpstore.Limits)",
			errProtocol, ks.bytes, grow, key, ks.limits.MaxBytes)
	}
	ks.vals[key] = val
	ks.bytes += grow
	ks.wake(key)
	return nil
}

// compareSet is torch's compareSet: a missing key is set only when expected is empty; the
// reply is the value the key has afterwards (or expected, when it is missing).
func (ks *keyspace) compareSet(key string, expected, desired []byte) ([]byte, error) {
	cur, ok := ks.vals[key]
	switch {
	case !ok && len(expected) == 0, ok && string(cur) == string(expected):
		return desired, ks.set(key, desired)
	case !ok:
		return expected, nil
	}
	return cur, nil
}

// add adds delta to the decimal integer stored under key (0 when missing).
func (ks *keyspace) add(key string, delta int64) (int64, error) {
	if cur, ok := ks.vals[key]; ok {
		n, err := strconv.ParseInt(string(cur), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: ADD to key %q, whose value %.40q is not an integer", errProtocol, key, cur)
		}
		delta += n
	}
	return delta, ks.set(key, []byte(strconv.FormatInt(delta, 10)))
}

func (ks *keyspace) get(key string) ([]byte, error) {
	v, ok := ks.vals[key]
	if !ok {
		return nil, fmt.Errorf("%w: GET of key %q, which is not set", errProtocol, key)
	}
	return v, nil
}

func (ks *keyspace) delete(key string) int64 {
	v, ok := ks.vals[key]
	if !ok {
		return 0
	}
	delete(ks.vals, key)
	ks.bytes -= int64(len(key) + len(v))
	return 1
}

func (ks *keyspace) has(keys []string) bool {
	for _, k := range keys {
		if _, ok := ks.vals[k]; !ok {
			return false
		}
	}
	return true
}

// wait registers c as waiting for the keys that are missing, and says whether none is.
func (ks *keyspace) wait(c *conn, keys []string) bool {
	missing := 0
	for _, k := range keys {
		if _, ok := ks.vals[k]; !ok && !c.awaits(k) {
			ks.waiters[k] = append(ks.waiters[k], c)
			c.awaited = append(c.awaited, k)
			missing++
		}
	}
	return missing == 0
}

// wake tells the connections waiting for key that it is set; those that waited for
// nothing else get STOP_WAITING.
func (ks *keyspace) wake(key string) {
	for _, c := range ks.waiters[key] {
		c.awaited = removeKey(c.awaited, key)
		if len(c.awaited) == 0 {
			c.send([]byte{stopWaiting})
		}
	}
	delete(ks.waiters, key)
}

// cancel forgets what c waits for.
func (ks *keyspace) cancel(c *conn) {
	for _, k := range c.awaited {
		w := ks.waiters[k]
		for i, x := range w {
			if x == c {
				w = append(w[:i], w[i+1:]...)
				break
			}
		}
		if len(w) == 0 {
			delete(ks.waiters, k)
		} else {
			ks.waiters[k] = w
		}
	}
	c.awaited = nil
}

func removeKey(keys []string, key string) []string {
	for i, k := range keys {
		if k == key {
			return append(keys[:i], keys[i+1:]...)
		}
	}
	return keys
}
