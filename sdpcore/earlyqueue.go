package sdpcore

// The early queue holds bytes a send took that cannot be framed yet: before
// the connection is up, while the peer has no credits for them, or corked.
// It is drained from the front and filled at the back, so its backing array
// (earlyStore) is reused instead of the slice being re-grown from nothing
// after every drain.

// earlyRoom returns the early queue with room for need more bytes: the
// queued bytes moved to the front of earlyStore when that makes the room
// (drained bytes leave a gap there), or to a larger store.
func (c *Conn) earlyRoom(need int) []byte {
	q := c.early
	if cap(q)-len(q) >= need {
		return q
	}
	store := c.earlyStore
	if cap(store) < len(q)+need {
		store = make([]byte, 0, max(2*cap(store), len(q)+need, 4<<10))
		c.earlyStore = store
	}
	return store[:copy(store[:len(q)], q)]
}
