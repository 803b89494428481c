'use strict';

const http = require('node:http');
const { handle } = require('./src/todos');

const port = Number(process.env.PORT || 3000);
http.createServer(handle).listen(port, () => {
  console.log(`to-do page on http://127.0.0.1:${port}/`);
});
