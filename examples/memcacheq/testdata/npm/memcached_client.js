// The npm memcached client, with its default options, against memcacheq;
// run by clients_test.go. usage: node memcached_client.js MODE HOST:PORT;
// prints one JSON line.
'use strict';
const Memcached = require('memcached');

const [mode, addr] = process.argv.slice(2);
const m = new Memcached(addr);

// call runs one command and resolves with its error and value.
function call(method, ...args) {
  return new Promise((resolve) => {
    m[method](...args, (err, v) => resolve({
      err: err ? String(err.message || err) : null,
      notStored: Boolean(err && err.notStored),
      v: v === undefined ? null : v,
    }));
  });
}

(async () => {
  const out = {};
  if (mode === 'full') {
    // -capacity 2: the third set finds the queue full; the gets that
    // drain it must still work.
    out.sets = [];
    for (const v of ['job1', 'job2', 'job3']) {
      out.sets.push(await call('set', 'jobs', v, 0));
    }
    out.gets = [];
    for (let i = 0; i < 3; i++) {
      out.gets.push(await call('get', 'jobs'));
    }
  } else if (mode === 'reliable') {
    out.open = await call('get', 'jobs/open');
    out.peek = await call('get', 'jobs/peek');
    out.abort = await call('get', 'jobs/abort');
    out.reopen = await call('get', 'jobs/close/open');
    out.next = await call('get', 'jobs/close/open');
    out.close = await call('get', 'jobs/close');
  } else {
    throw new Error('unknown mode ' + mode);
  }
  console.log(JSON.stringify(out));
  m.end();
  process.exit(0); // a server the client marked as failing keeps timers alive
})();
