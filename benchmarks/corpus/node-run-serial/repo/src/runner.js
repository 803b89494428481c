'use strict';

// Runs async jobs (functions returning promises) one after another, or with a concurrency cap.

async function runSerial(jobs) {
  const results = [];
  jobs.forEach(async (job, index) => {
    results[index] = await job();
  });
  return results;
}

async function runLimited(jobs, limit) {
  if (!Number.isInteger(limit) || limit < 1) {
    throw new RangeError('limit must be a positive integer');
  }
  const results = new Array(jobs.length);
  let next = 0;
  async function worker() {
    while (next < jobs.length) {
      const index = next++;
      results[index] = await jobs[index]();
    }
  }
  const workers = [];
  for (let i = 0; i < Math.min(limit, jobs.length); i++) {
    workers.push(worker());
  }
  await Promise.all(workers);
  return results;
}

function delay(ms, value) {
  return new Promise((resolve) => setTimeout(() => resolve(value), ms));
}

module.exports = { runSerial, runLimited, delay };
