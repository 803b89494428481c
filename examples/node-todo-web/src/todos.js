'use strict';

const TODOS = [
  { title: 'Write the spec', done: true },
  { title: 'Boot the app', done: false },
  { title: 'Take a screenshot', done: false },
];

function remaining(todos) {
  return todos.filter((todo) => todo.done).length;
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function renderPage(todos) {
  const items = todos
    .map((t) => `<li class="${t.done ? 'done' : 'open'}">${escapeHtml(t.title)}</li>`)
    .join('\n      ');
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <title>To-do</title>
    <link rel="icon" href="data:,">
    <style>
      body { font-family: sans-serif; margin: 3rem; background: #f7f7fb; color: #1d1d35; }
      h1 { color: #3b3bb3; }
      li.done { text-decoration: line-through; color: #888; }
    </style>
  </head>
  <body>
    <h1>To-do</h1>
    <p id="remaining">${remaining(todos)} left</p>
    <ul>
      ${items}
    </ul>
  </body>
</html>
`;
}

function handle(req, res) {
  if (req.url !== '/') {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
    return;
  }
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(renderPage(TODOS));
}

module.exports = { TODOS, remaining, renderPage, handle };
