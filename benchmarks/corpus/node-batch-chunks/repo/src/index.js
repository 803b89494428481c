'use strict';

// Send analytics records in batches, retrying a failed batch a few times.

const { chunk } = require('./chunk');

async function sendAll(records, send, { batchSize = 50, retries = 2 } = {}) {
  const report = { sent: 0, batches: 0, failed: [] };
  for (const batch of chunk(records, batchSize)) {
    let attempt = 0;
    for (;;) {
      try {
        await send(batch);
        report.sent += batch.length;
        report.batches++;
        break;
      } catch (error) {
        if (attempt++ >= retries) {
          report.failed.push({ first: batch[0], size: batch.length, error: String(error.message) });
          break;
        }
      }
    }
  }
  return report;
}

function summary(report) {
  const failed = report.failed.reduce((n, f) => n + f.size, 0);
  return `${report.sent} sent in ${report.batches} batches, ${failed} failed`;
}

module.exports = { sendAll, summary };
