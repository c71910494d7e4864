// An http server for the compatibility suite: answers every request with the same body of
// SIZE bytes (a repeating pattern), and exits after N requests.
//   node http.js PORT SIZE N
'use strict';
const http = require('http');
const [port, size, n] = process.argv.slice(2).map(Number);
const body = Buffer.alloc(size);
for (let i = 0; i < size; i++) body[i] = (i * 7 + (i >> 8)) & 0xff;
let left = n;
const srv = http.createServer((req, res) => {
  res.end(body);
  if (--left === 0) srv.close();
});
srv.listen(port, '127.0.0.1', () => console.log('listening'));
