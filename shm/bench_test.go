package shm

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
)

var benchSizes = []int{64, 1024, 65536}

// BenchmarkRingRecord: one record through a ring and back out on one
// goroutine, the ring's own cost per message (no waiting, no other core).
func BenchmarkRingRecord(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			pr := newPair(b, 1<<20)
			msg, got := make([]byte, size), make([]byte, 0, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := pr.mp.Append(msg); err != nil {
					b.Fatal(err)
				}
				pr.mp.Publish()
				var err error
				if got, err = pr.pc.Next(got[:0]); err != nil {
					b.Fatal(err)
				}
				pr.pc.Release()
			}
		})
	}
}

// BenchmarkRingStream: messages from a producer goroutine to a consumer
// goroutine (two cores when the machine has them) through a 1 MiB ring,
// spinning when full or empty; BenchmarkTCPStream is the same stream over
// a loopback TCP connection, for the ratio.
func BenchmarkRingStream(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			pr := newPair(b, 1<<20)
			p, c := pr.mp, pr.pc
			b.SetBytes(int64(size))
			b.ReportAllocs()
			done := make(chan error, 1)
			go func() {
				msg := make([]byte, size)
				for i := 0; i < b.N; i++ {
					for {
						err := p.Append(msg)
						if err == nil {
							break
						}
						if !errors.Is(err, ErrFull) {
							done <- err
							return
						}
						p.Publish()
						runtime.Gosched()
					}
					if i%16 == 0 {
						p.Publish()
					}
				}
				p.Publish()
				done <- nil
			}()
			got := make([]byte, 0, size)
			for i := 0; i < b.N; {
				var err error
				got, err = c.Next(got[:0])
				if errors.Is(err, ErrEmpty) {
					c.Release()
					runtime.Gosched()
					continue
				}
				if err != nil {
					b.Fatal(err)
				}
				i++
				if i%16 == 0 {
					c.Release()
				}
			}
			c.Release()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

func BenchmarkTCPStream(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			l, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			done := make(chan error, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					done <- err
					return
				}
				defer c.Close()
				msg := make([]byte, size)
				for i := 0; i < b.N; i++ {
					if _, err := c.Write(msg); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			c, err := net.Dial("tcp4", l.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			buf := make([]byte, 256<<10)
			want := int64(b.N) * int64(size)
			for got := int64(0); got < want; {
				n, err := c.Read(buf)
				if err != nil && err != io.EOF {
					b.Fatal(err)
				}
				got += int64(n)
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
