// A net echo server and client for the compatibility suite.
//   node echo.js server PORT N     echoes every connection; exits after N connections closed
//   node echo.js client PORT FILE  sends FILE over 4 connections at once, reads every byte
//                                  back, exits 0 when each echo has the file's sha256
'use strict';
const net = require('net');
const fs = require('fs');
const crypto = require('crypto');

const [mode, port, arg] = process.argv.slice(2);
if (mode === 'server') {
  let left = Number(arg);
  const srv = net.createServer((sock) => {
    sock.pipe(sock);
    sock.on('error', (e) => { console.error('server socket:', e.message); process.exitCode = 1; });
    sock.on('close', () => { if (--left === 0) srv.close(); });
  });
  srv.listen(Number(port), '127.0.0.1', () => console.log('listening'));
} else {
  const data = fs.readFileSync(arg);
  const want = crypto.createHash('sha256').update(data).digest('hex');
  let pending = 4;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < 4; i++) {
    const h = crypto.createHash('sha256');
    let got = 0;
    const sock = net.connect(Number(port), '127.0.0.1', () => sock.end(data));
    sock.on('data', (b) => { h.update(b); got += b.length; });
    sock.on('error', (e) => { console.error('client', i, e.message); process.exit(1); });
    sock.on('end', () => {
      const sum = h.digest('hex');
      if (sum !== want || got !== data.length) {
        console.error('client', i, 'got', got, 'bytes, sha256', sum, 'want', want);
        process.exit(1);
      }
      if (--pending === 0) {
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        console.log('echoed', 4 * data.length, 'bytes each way in', s.toFixed(3), 's');
        console.log('rate', (2 * 4 * data.length / s / 1e6).toFixed(0));
      }
    });
  }
}
