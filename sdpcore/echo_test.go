package sdpcore

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoBackPressure is an event loop's echo server on c, as node's
// socket.pipe(socket) is one: it reads only while it holds nothing unsent,
// so that a send that cannot go stops its reading (back-pressure), and at
// the end of the stream it sends what it holds and shuts down its side.
func echoBackPressure(t *testing.T, c *Conn, until time.Time) error {
	buf := make([]byte, 64<<10)
	var pending []byte
	eof := false
	for {
		if len(pending) > 0 {
			k, err := c.Send([][]byte{pending}, time.Now())
			if c.NeedsBackground() { // as the engine does after every send
				go c.Background(time.Minute)
			}
			if err == ErrWouldBlock {
				if err := wait(t, c, EvOut, until); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			pending = pending[k:]
			continue
		}
		if eof {
			return c.Shutdown(false, true, time.Now())
		}
		k, err := c.Recv([][]byte{buf}, 0, time.Now())
		if err == ErrWouldBlock {
			if err := wait(t, c, EvIn, until); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if k == 0 {
			eof = true
			continue
		}
		pending = append(pending[:0], buf[:k]...)
	}
}

// TestEchoBackPressure: a client streams to an echo server that stops
// reading while its echo cannot be sent, and reads every byte back, over
// shared memory and over iWARP. Both ends' sends wait for each other's
// reads here: a flow-control rule whose waits the other end does not answer
// hangs it (node's echo in the compatibility suite found one).
func TestEchoBackPressure(t *testing.T) {
	const size = 24 << 20
	cfg := DefaultConfig()
	cfg.ZCopyThreshold = 0
	for _, over := range []string{"shm", "iwarp"} {
		t.Run(over, func(t *testing.T) {
			var a, p *Conn
			if over == "shm" {
				a, p, _, _, _, _ = shmPairRing(t, cfg, SameHostRing)
			} else {
				c := cfg
				c.SameHost = false
				a, p = connPair(t, c)
			}
			until := time.Now().Add(90 * time.Second)
			data := make([]byte, size)
			rand.New(rand.NewSource(9)).Read(data)
			served, sent := make(chan error, 1), make(chan error, 1)
			go func() { served <- echoBackPressure(t, p, until) }()
			go func() {
				err := sendMixed(t, a, data, rand.New(rand.NewSource(10)), until)
				if err == nil {
					err = a.Shutdown(false, true, time.Now())
				}
				sent <- err
			}()
			got, err := recvAll(t, a, size, rand.New(rand.NewSource(11)), until)
			require.NoError(t, err)
			require.NoError(t, <-sent)
			require.NoError(t, <-served)
			require.True(t, bytes.Equal(data, got), "the echo differs")
		})
	}
}
