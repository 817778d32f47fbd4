// The checks the interop scripts share: each check prints one line, and
// run() exits non-zero when any failed. Required by interop.js and
// bearer.js.
"use strict";

let failures = 0;

function check(ok, what, detail) {
  if (ok) {
    console.log("ok   " + what);
  } else {
    failures++;
    console.log("FAIL " + what + (detail === undefined ? "" : ": " + JSON.stringify(detail)));
  }
}

// expectError runs fn and checks that it throws a RestError with the given
// status and code; it returns the error. For single-entity operations the
// SDK leaves err.code unset and keeps the service's code in the parsed
// body; submitTransaction sets err.code.
async function expectError(what, status, code, fn) {
  try {
    await fn();
  } catch (err) {
    const got = err.code ?? err.response?.parsedBody?.odataError?.code;
    check(err.statusCode === status && got === code, what + ` fails with ${status} ${code}`,
      { statusCode: err.statusCode, code: got, message: err.message });
    return err;
  }
  check(false, what + ` fails with ${status} ${code}`, "it succeeded");
  return undefined;
}

// run runs main and exits: 0 when every check passed.
function run(main) {
  main().then(
    () => {
      console.log(failures === 0 ? "all checks passed" : `${failures} checks failed`);
      process.exit(failures === 0 ? 0 : 1);
    },
    (err) => {
      console.log("FAIL unexpected error: " + (err && err.stack ? err.stack : err));
      if (err && err.statusCode !== undefined) {
        console.log(JSON.stringify({ statusCode: err.statusCode, code: err.code }));
      }
      process.exit(1);
    },
  );
}

module.exports = { check, expectError, run };
