package sdpcore

import "sync"

// The early queue holds bytes a send took that cannot be framed yet: before
// the connection is up, while the peer has no credits for them, or corked.
// It is drained from the front and filled at the back. Its backing array
// (earlyStore) comes from a pool of the process, one per size class, and
// goes back to it whenever the queue is empty: a busy sender queues and
// drains many times a second, and a proxy opens a connection per request
// whose corked writes grow the queue to earlyMax. Grown from nothing each
// time, the queue allocated 480 KiB per connection (stores of 32 to 256
// KiB), and the garbage collector ran every second or third request of
// haproxy's 2 MiB responses.

// earlyClassMin and earlyClasses: the stores' sizes, earlyClassMin << k for
// k < earlyClasses, the last being earlyMax.
const (
	earlyClassMin = 4 << 10
	earlyClasses  = 7
)

// earlyBuf boxes a store, so that the pool holds a pointer and putting a
// store back allocates nothing.
type earlyBuf struct{ b []byte }

var earlyPools [earlyClasses]sync.Pool

// earlyClass is the smallest class that holds n bytes, or -1 when none does.
func earlyClass(n int) int {
	for k := 0; k < earlyClasses; k++ {
		if n <= earlyClassMin<<k {
			return k
		}
	}
	return -1
}

// getEarly returns a store of at least n bytes' capacity, empty.
func getEarly(n int) *earlyBuf {
	k := earlyClass(n)
	if k < 0 {
		return &earlyBuf{b: make([]byte, 0, n)} // a queue the zero-copy path grew past earlyMax
	}
	if e, ok := earlyPools[k].Get().(*earlyBuf); ok {
		return e
	}
	return &earlyBuf{b: make([]byte, 0, earlyClassMin<<k)}
}

// putEarly gives a store back; one of no class is left to the collector.
func putEarly(e *earlyBuf) {
	if e == nil {
		return
	}
	if k := earlyClass(cap(e.b)); k >= 0 && cap(e.b) == earlyClassMin<<k {
		e.b = e.b[:0]
		earlyPools[k].Put(e)
	}
}

// earlyRoom returns the early queue with room for need more bytes: the
// queued bytes moved to the front of the store when that makes the room
// (drained bytes leave a gap there), or to a larger store.
func (c *Conn) earlyRoom(need int) []byte {
	q := c.early
	if cap(q)-len(q) >= need {
		return q
	}
	if c.earlyStore == nil || cap(c.earlyStore.b) < len(q)+need {
		grown := 0
		if c.earlyStore != nil {
			grown = 2 * cap(c.earlyStore.b)
		}
		store := getEarly(max(grown, len(q)+need))
		n := copy(store.b[:len(q)], q)
		putEarly(c.earlyStore) // q, which may lie in it, is copied
		c.earlyStore = store
		return store.b[:n]
	}
	return c.earlyStore.b[:copy(c.earlyStore.b[:len(q)], q)]
}

// releaseEarly gives the store of an empty early queue back to the pool.
func (c *Conn) releaseEarly() {
	c.early = nil
	putEarly(c.earlyStore)
	c.earlyStore = nil
}
