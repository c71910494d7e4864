// The echo of the compatibility suite's java case: a selector-driven server with non-blocking
// channels that, at a client's end of stream, writes what it still holds with the channel made
// blocking and closes it; and a client whose second thread writes its bytes in one blocking
// loop and then shuts its output down while the main thread reads and checks the echo.
//
//   java NioEcho server PORT CONNS   serves CONNS connections on 127.0.0.1:PORT, then exits
//   java NioEcho client PORT BYTES   prints "ok BYTES NANOS" when the whole echo came back
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

public class NioEcho {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[1]);
        if (args[0].equals("server")) {
            server(port, Integer.parseInt(args[2]));
        } else {
            client(port, Long.parseLong(args[2]));
        }
    }

    static void server(int port, int conns) throws Exception {
        ServerSocketChannel ss = ServerSocketChannel.open();
        ss.bind(new InetSocketAddress("127.0.0.1", port));
        ss.configureBlocking(false);
        Selector sel = Selector.open();
        ss.register(sel, SelectionKey.OP_ACCEPT);
        Map<SocketChannel, ArrayDeque<ByteBuffer>> held = new HashMap<>();
        int ended = 0;
        ArrayDeque<SocketChannel> ending = new ArrayDeque<>();
        while (ended < conns) {
            if (sel.selectedKeys().isEmpty()) {
                sel.select();
            }
            Iterator<SelectionKey> it = sel.selectedKeys().iterator();
            while (it.hasNext()) {
                SelectionKey k = it.next();
                it.remove();
                if (k.isAcceptable()) {
                    SocketChannel c = ss.accept();
                    if (c != null) {
                        c.configureBlocking(false);
                        c.register(sel, SelectionKey.OP_READ);
                        held.put(c, new ArrayDeque<>());
                    }
                    continue;
                }
                SocketChannel c = (SocketChannel) k.channel();
                ArrayDeque<ByteBuffer> q = held.get(c);
                if (k.isWritable()) {
                    while (!q.isEmpty()) {
                        ByteBuffer b = q.peek();
                        c.write(b);
                        if (b.hasRemaining()) {
                            break;
                        }
                        q.poll();
                    }
                    if (q.isEmpty()) {
                        k.interestOps(SelectionKey.OP_READ);
                    }
                }
                if (!k.isValid() || !k.isReadable()) {
                    continue;
                }
                ByteBuffer b = ByteBuffer.allocate(65536);
                if (c.read(b) < 0) {
                    k.cancel(); // the channel leaves the selector at its next selection
                    ending.add(c);
                    continue;
                }
                b.flip();
                if (q.isEmpty()) {
                    c.write(b);
                }
                if (b.hasRemaining()) {
                    q.add(b);
                    k.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
                }
            }
            if (ending.isEmpty()) {
                continue;
            }
            // A client's end: what is held goes out blocking, then the close. The channel may
            // turn blocking once deregistered, which the selection after its key's cancel does
            // (not inside the iteration above: it changes the set being iterated).
            sel.selectNow();
            for (SocketChannel c; (c = ending.poll()) != null; ) {
                c.configureBlocking(true);
                for (ByteBuffer r : held.remove(c)) {
                    while (r.hasRemaining()) {
                        c.write(r);
                    }
                }
                c.close();
                ended++;
            }
        }
    }

    static byte at(long i) {
        return (byte) (i * 31 + (i >> 13));
    }

    static void client(int port, long total) throws Exception {
        long t0 = System.nanoTime();
        SocketChannel c = SocketChannel.open(new InetSocketAddress("127.0.0.1", port));
        Thread writer = new Thread(() -> {
            try {
                ByteBuffer b = ByteBuffer.allocate(1 << 20);
                for (long off = 0; off < total; ) {
                    b.clear();
                    int n = (int) Math.min(b.capacity(), total - off);
                    for (int i = 0; i < n; i++) {
                        b.put(at(off + i));
                    }
                    b.flip();
                    while (b.hasRemaining()) {
                        c.write(b);
                    }
                    off += n;
                }
                c.shutdownOutput();
            } catch (Exception e) {
                e.printStackTrace();
                System.exit(3);
            }
        });
        writer.start();
        ByteBuffer r = ByteBuffer.allocate(1 << 16);
        long got = 0;
        for (;;) {
            r.clear();
            int n = c.read(r);
            if (n < 0) {
                break;
            }
            for (int i = 0; i < n; i++) {
                if (r.get(i) != at(got + i)) {
                    System.out.println("echo differs at byte " + (got + i));
                    System.exit(2);
                }
            }
            got += n;
        }
        writer.join();
        c.close();
        if (got != total) {
            System.out.println("echo ended after " + got + " of " + total + " bytes");
            System.exit(2);
        }
        System.out.println("ok " + got + " " + (System.nanoTime() - t0));
    }
}
