// Loopwright's reporter for node's test runner, loaded by absolute path with
// `--test-reporter=<this file> --test-reporter-destination=stdout`.
//
// It runs in the runner's parent process; test files run in child processes. At load, before
// any test file starts, it reads this run's id and key from the file named by
// LOOPWRIGHT_STREAM, deletes the file and forgets the variable, then prints one signed record
// per test as the test ends and a completion record with the runner's exit status at the end.
// Ids match the JUnit reporter's: enclosing suite and test names, then the name, joined by " > ".
import { createHmac } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';

const MAGIC = '\x1eLOOPWRIGHT1 ';
const MESSAGE_LIMIT = 1500;

const KEY_WAIT_MS = 20000;
// The whole file, so a key read while it is still being written is never taken.
const KEY_TEXT = /^([0-9a-f]{16})\n([0-9a-f]{64})\n$/;

const keyPath = process.env.LOOPWRIGHT_STREAM || '';
delete process.env.LOOPWRIGHT_STREAM;
let runId = '';
let key = null;
if (keyPath) {
  // The host writes the key while the runner starts. Waiting here, synchronously, holds the
  // runner back: it starts no test file until its reporters have loaded.
  const deadline = Date.now() + KEY_WAIT_MS;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  while (key === null && Date.now() < deadline) {
    let found = null;
    try {
      found = KEY_TEXT.exec(readFileSync(keyPath, 'ascii'));
    } catch (error) {
      if (error.code !== 'ENOENT') throw error;
    }
    if (found) {
      rmSync(keyPath, { force: true });
      [, runId] = found;
      key = Buffer.from(found[2], 'hex');
    } else {
      Atomics.wait(pause, 0, 0, 2);
    }
  }
}

let seq = 0;
function record(body) {
  const payload = JSON.stringify(sortKeys(body)).replace(/[\u007f-\uffff]/g, escapeChar);
  const mac = createHmac('sha256', key).update(`${runId} ${seq} ${payload}`).digest('hex');
  const line = `${MAGIC}${runId} ${seq} ${payload} ${mac}\n`;
  seq += 1;
  return line;
}

function escapeChar(c) {
  return '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0');
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortKeys(value[k])]));
  }
  return value;
}

function clip(text) {
  if (text.length <= MESSAGE_LIMIT) return text;
  return `${text.slice(0, MESSAGE_LIMIT / 3)}\n…\n${text.slice(-(MESSAGE_LIMIT * 2) / 3)}`;
}

function failureText(error) {
  if (!error) return '';
  const cause = error.cause ?? error;
  return clip(String((cause && cause.message) || cause || ''));
}

export default async function* loopwrightReporter(source) {
  if (!key) {
    throw new Error(`node_reporter.mjs: this run's key never arrived at ${keyPath || '(unset)'}`);
  }
  yield record({ type: 'start', runner: 'node' });
  const counts = { passed: 0, failed: 0, error: 0, skipped: 0 };
  // Per file: the names of the tests now running, and which of them have started subtests.
  const files = new Map();
  for await (const event of source) {
    const data = event.data || {};
    const file = data.file || '';
    if (!files.has(file)) files.set(file, { names: [], parents: [] });
    const state = files.get(file);
    const level = Number(data.nesting || 0);
    if (event.type === 'test:start') {
      state.names.length = level;
      state.parents.length = level;
      state.names[level] = String(data.name);
      state.parents[level] = false;
      if (level > 0) state.parents[level - 1] = true;
      continue;
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const isParent = state.parents[level] === true || data.details?.type === 'suite';
    const id = [...state.names.slice(0, level), String(data.name)].join(' > ');
    state.names.length = level;
    state.parents.length = level;
    if (isParent) continue; // a suite: its tests carry the outcomes, as in the JUnit report
    let outcome = event.type === 'test:pass' ? 'passed' : 'failed';
    if (data.skip || data.todo) outcome = 'skipped';
    counts[outcome] += 1;
    const message = outcome === 'failed' ? failureText(data.details?.error) : '';
    yield record({ type: 'test', id, outcome, message });
  }
  const status = typeof process.exitCode === 'number' ? process.exitCode : 0;
  yield record({ type: 'end', status, counts });
}
