// Drives a pgtables server with @azure/data-tables: single-entity operations,
// submitTransaction (successful and failing), connection strings and shared
// access signatures made by the SDK. Started by
// integration/js_interop_test.go with the service URL and the account in
// the environment; exits non-zero on any mismatch.
//
// The endpoint must be an IP address such as http://127.0.0.1:<port>/<account>:
// with "localhost" the SDK switches to its Cosmos DB mode.
"use strict";

const {
  TableClient,
  TableServiceClient,
  AzureNamedKeyCredential,
  AzureSASCredential,
  generateTableSas,
  generateAccountSas,
  odata,
} = require("@azure/data-tables");
const { check, expectError, run } = require("./checks.js");

const endpoint = process.env.PGTABLES_ENDPOINT;
const account = process.env.PGTABLES_ACCOUNT;
const key = process.env.PGTABLES_KEY;
if (!endpoint || !account || !key) {
  console.error("set PGTABLES_ENDPOINT, PGTABLES_ACCOUNT and PGTABLES_KEY");
  process.exit(2);
}

const options = { allowInsecureConnection: true, retryOptions: { maxRetries: 0 } };
const credential = new AzureNamedKeyCredential(account, key);
const tableName = "js" + Date.now().toString(36) + Math.floor(Math.random() * 1e6).toString(36);
const service = new TableServiceClient(endpoint, credential, options);
const client = new TableClient(endpoint, tableName, credential, options);

async function exists(pk, rk) {
  try {
    await client.getEntity(pk, rk);
    return true;
  } catch (err) {
    if (err.statusCode === 404) {
      return false;
    }
    throw err;
  }
}

async function singleEntityOperations() {
  const pk = "single";
  await client.createEntity({ partitionKey: pk, rowKey: "a", Name: "first", N: 1 });
  let e = await client.getEntity(pk, "a");
  check(e.Name === "first" && e.N === 1 && typeof e.etag === "string" && e.etag.startsWith('W/"'),
    "createEntity then getEntity", e);

  await client.updateEntity({ partitionKey: pk, rowKey: "a", Extra: true }, "Merge", { etag: e.etag });
  e = await client.getEntity(pk, "a");
  check(e.Name === "first" && e.Extra === true, "updateEntity Merge with the ETag keeps and adds", e);

  await client.updateEntity({ partitionKey: pk, rowKey: "a", Name: "second" }, "Replace");
  e = await client.getEntity(pk, "a");
  check(e.Name === "second" && e.Extra === undefined && e.N === undefined, "updateEntity Replace drops the rest", e);

  await expectError("updateEntity with a stale ETag", 412, "UpdateConditionNotSatisfied",
    () => client.updateEntity({ partitionKey: pk, rowKey: "a", Name: "third" }, "Replace",
      { etag: 'W/"datetime\'2020-01-01T00%3A00%3A00.0000000Z\'"' }));

  await client.upsertEntity({ partitionKey: pk, rowKey: "b", V: 1 }, "Replace");
  await client.upsertEntity({ partitionKey: pk, rowKey: "b", W: 2 }, "Merge");
  e = await client.getEntity(pk, "b");
  check(e.V === 1 && e.W === 2, "upsertEntity Replace then Merge", e);

  await expectError("createEntity of an existing entity", 409, "EntityAlreadyExists",
    () => client.createEntity({ partitionKey: pk, rowKey: "b" }));

  await client.createEntity({ partitionKey: "other", rowKey: "z", V: 9 });
  const listed = [];
  for await (const x of client.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${pk} and V ge ${1}` } })) {
    listed.push(x.rowKey);
  }
  check(listed.join() === "b", "listEntities with a filter", listed);

  await client.deleteEntity(pk, "a");
  check(!(await exists(pk, "a")), "deleteEntity");
  await expectError("deleteEntity of a missing entity", 404, "ResourceNotFound",
    () => client.deleteEntity(pk, "a"));
}

async function transactions() {
  // A partition key with a quote: JS doubles it in sub-request URLs.
  const pk = "p'1 ü";
  const seeded = {};
  for (const rk of ["c", "d", "g"]) {
    await client.createEntity({ partitionKey: pk, rowKey: rk, Old: "o", V: 0 });
    seeded[rk] = (await client.getEntity(pk, rk)).etag;
  }

  const ok = await client.submitTransaction([
    ["create", { partitionKey: pk, rowKey: "a", V: 1 }],
    ["create", { partitionKey: pk, rowKey: "b", V: 2 }],
    ["update", { partitionKey: pk, rowKey: "c", V: 3 }, "Merge", { etag: seeded.c }],
    ["update", { partitionKey: pk, rowKey: "d", V: 4 }, "Replace"],
    ["upsert", { partitionKey: pk, rowKey: "e", V: 5 }, "Replace"],
    ["upsert", { partitionKey: pk, rowKey: "f", V: 6 }, "Merge"],
    ["delete", { partitionKey: pk, rowKey: "g" }],
  ]);
  check(ok.status === 202, "submitTransaction answers 202", ok.status);
  const statuses = ok.subResponses.map((s) => s.status);
  check(statuses.length === 7 && statuses.every((s) => s === 204), "one 204 sub-response per action", statuses);
  const etags = ok.subResponses.map((s) => s.etag);
  check(etags.slice(0, 6).every((t) => typeof t === "string" && t.startsWith('W/"')) && etags[6] === undefined,
    "an ETag for every action but the delete", etags);
  const a = ok.getResponseForEntity("a");
  const readA = await client.getEntity(pk, "a");
  check(a !== undefined && a.etag === readA.etag, "getResponseForEntity gives the inserted entity's ETag",
    { answered: a, stored: readA.etag });

  const c = await client.getEntity(pk, "c");
  const d = await client.getEntity(pk, "d");
  const e = await client.getEntity(pk, "e");
  const f = await client.getEntity(pk, "f");
  check(c.Old === "o" && c.V === 3, "update Merge in a transaction", c);
  check(d.Old === undefined && d.V === 4, "update Replace in a transaction", d);
  check(e.V === 5 && f.V === 6, "upserts in a transaction", { e, f });
  check(!(await exists(pk, "g")), "delete in a transaction");
  check(readA.timestamp === c.timestamp && c.timestamp === f.timestamp, "one Timestamp for the transaction",
    [readA.timestamp, c.timestamp, f.timestamp]);
  check(etags[2] === c.etag && etags[3] === d.etag, "sub-response ETags are the stored ones",
    { answered: etags.slice(2, 4), stored: [c.etag, d.etag] });

  // A failing transaction: nothing of it is written, and JS reports the
  // failing action's status and code.
  const failed = await expectError("submitTransaction with a duplicate insert", 409, "EntityAlreadyExists",
    () => client.submitTransaction([
      ["create", { partitionKey: pk, rowKey: "x", V: 1 }],
      ["update", { partitionKey: pk, rowKey: "c", V: 99 }, "Replace"],
      ["create", { partitionKey: pk, rowKey: "a", V: 1 }],
    ]));
  check(failed !== undefined && /^2:/.test(failed.message), "the failure names action 2", failed && failed.message);
  check(!(await exists(pk, "x")), "the failed transaction's insert is not there");
  check((await client.getEntity(pk, "c")).V === 3, "the failed transaction's update is not there");

  await expectError("submitTransaction with a stale ETag", 412, "UpdateConditionNotSatisfied",
    () => client.submitTransaction([
      ["create", { partitionKey: pk, rowKey: "y", V: 1 }],
      ["update", { partitionKey: pk, rowKey: "c", V: 100 }, "Merge", { etag: seeded.c }],
    ]));
  check(!(await exists(pk, "y")), "the stale transaction's insert is not there");

  await expectError("submitTransaction deleting a missing entity", 404, "ResourceNotFound",
    () => client.submitTransaction([["delete", { partitionKey: pk, rowKey: "nope" }]]));

  // Keys that hold the string JS splits answers on.
  const odd = await client.submitTransaction([
    ["create", { partitionKey: pk, rowKey: "--changesetresponse_k" }],
    ["create", { partitionKey: pk, rowKey: "k2" }],
  ]);
  check(odd.subResponses.length === 2, "keys holding --changesetresponse_ do not split the answer",
    odd.subResponses);
}

async function rowKeys(c) {
  const keys = [];
  for await (const x of c.listEntities()) {
    keys.push(x.partitionKey + "/" + x.rowKey);
  }
  return keys;
}

// Connection strings and SASes as the SDK builds them. Out-of-scope
// requests must be refused with Azure's codes and write nothing.
async function connectionStringsAndSAS() {
  await client.createEntity({ partitionKey: "tenant41", rowKey: "r", V: 41 });
  await client.createEntity({ partitionKey: "tenant42", rowKey: "r", V: 42 });
  await client.createEntity({ partitionKey: "tenant43", rowKey: "r", V: 43 });

  const byKey = TableClient.fromConnectionString(
    `DefaultEndpointsProtocol=http;AccountName=${account};AccountKey=${key};TableEndpoint=${endpoint};`,
    tableName, options);
  check((await byKey.getEntity("tenant42", "r")).V === 42, "an account-key connection string");

  // A table SAS for one partition, with query and add but not update or
  // delete.
  const sas = await generateTableSas(tableName, credential, {
    permissions: { query: true, add: true },
    expiresOn: new Date(Date.now() + 3600e3),
    startPartitionKey: "tenant42",
    endPartitionKey: "tenant42",
  });
  const tenant = new TableClient(endpoint, tableName, new AzureSASCredential(sas), options);
  check((await tenant.getEntity("tenant42", "r")).V === 42, "a table SAS reads inside its range");
  await expectError("a table SAS reading outside its range", 403, "AuthorizationFailure",
    () => tenant.getEntity("tenant43", "r"));
  const seen = await rowKeys(tenant);
  check(seen.join() === "tenant42/r", "a query with a ranged table SAS stays in the range", seen);
  await tenant.createEntity({ partitionKey: "tenant42", rowKey: "s", V: 1 });
  check(await exists("tenant42", "s"), "a table SAS with add inserts inside its range");
  await expectError("a table SAS inserting outside its range", 403, "AuthorizationFailure",
    () => tenant.createEntity({ partitionKey: "tenant41", rowKey: "s" }));
  check(!(await exists("tenant41", "s")), "the refused insert wrote nothing");
  await expectError("a table SAS deleting without d", 403, "AuthorizationPermissionMismatch",
    () => tenant.deleteEntity("tenant42", "r"));
  check(await exists("tenant42", "r"), "the refused delete deleted nothing");
  await expectError("a table SAS upserting without u", 403, "AuthorizationPermissionMismatch",
    () => tenant.upsertEntity({ partitionKey: "tenant42", rowKey: "r", V: 0 }, "Replace"));
  await expectError("a table SAS in a transaction leaving its range", 403, "AuthorizationFailure",
    () => tenant.submitTransaction([["create", { partitionKey: "tenant41", rowKey: "t" }]]));
  check(!(await exists("tenant41", "t")), "the refused transaction wrote nothing");

  const bySAS = TableClient.fromConnectionString(`TableEndpoint=${endpoint};SharedAccessSignature=${sas}`,
    tableName, options);
  check((await bySAS.getEntity("tenant42", "r")).V === 42, "a SAS connection string");
  await expectError("a SAS connection string outside its range", 403, "AuthorizationFailure",
    () => bySAS.getEntity("tenant41", "r"));

  const tampered = sas.replace(/sp=[a-z]+/, "sp=raud");
  const forged = new TableClient(endpoint, tableName, new AzureSASCredential(tampered), options);
  await expectError("a table SAS with altered permissions", 403, "AuthenticationFailed",
    () => forged.deleteEntity("tenant42", "r"));
  check(await exists("tenant42", "r"), "the tampered SAS deleted nothing");

  const expired = await generateTableSas(tableName, credential, {
    permissions: { query: true },
    expiresOn: new Date(Date.now() - 60e3),
  });
  await expectError("an expired table SAS", 403, "AuthenticationFailed",
    () => new TableClient(endpoint, tableName, new AzureSASCredential(expired), options).getEntity("tenant42", "r"));

  // Account SASes: objects (entities) read-only, then containers (tables).
  const objects = generateAccountSas(credential, {
    resourceTypes: "o",
    permissions: { query: true },
    expiresOn: new Date(Date.now() + 3600e3),
  });
  const reader = new TableClient(endpoint, tableName, new AzureSASCredential(objects), options);
  const read = await rowKeys(reader);
  check(["tenant41/r", "tenant42/r", "tenant43/r", "tenant42/s"].every((k) => read.includes(k)),
    "an account SAS for objects queries entities", read);
  await expectError("a read-only account SAS inserting", 403, "AuthorizationPermissionMismatch",
    () => reader.createEntity({ partitionKey: "tenant42", rowKey: "u" }));
  check(!(await exists("tenant42", "u")), "the refused account-SAS insert wrote nothing");
  const readerService = new TableServiceClient(endpoint, new AzureSASCredential(objects), options);
  await expectError("an object account SAS listing tables", 403, "AuthorizationResourceTypeMismatch",
    async () => { for await (const _ of readerService.listTables()) { /* drain */ } });

  const containers = generateAccountSas(credential, {
    resourceTypes: "c",
    permissions: { list: true },
    expiresOn: new Date(Date.now() + 3600e3),
  });
  const lister = new TableServiceClient(endpoint, new AzureSASCredential(containers), options);
  const names = [];
  for await (const t of lister.listTables()) {
    names.push(t.name);
  }
  check(names.includes(tableName), "an account SAS for containers lists tables", names);
  await expectError("a list-only account SAS creating a table", 403, "AuthorizationPermissionMismatch",
    () => lister.createTable(tableName + "x"));
}

// wholeDoubles: a Double of whole value must read back as a Double, not as
// an Int32, when types are kept (disableTypeConversion), on a point read, in
// a query and after being written back as read.
async function wholeDoubles() {
  const pk = "doubles";
  const raw = { disableTypeConversion: true };
  await client.createEntity({ partitionKey: pk, rowKey: "a", Whole: { value: "5", type: "Double" },
    Zero: { value: "0", type: "Double" }, Half: 2.5, Count: 7 });
  const types = (e) => [e.Whole?.type, e.Zero?.type, e.Half?.type, e.Count?.type].join();
  const want = "Double,Double,Double,Int32";
  let e = await client.getEntity(pk, "a", raw);
  check(types(e) === want && e.Whole.value == 5, "getEntity reads a whole Double as a Double", e);
  const listed = [];
  for await (const x of client.listEntities({ ...raw, queryOptions: { filter: odata`PartitionKey eq ${pk}` } })) {
    listed.push(x);
  }
  check(listed.length === 1 && types(listed[0]) === want, "listEntities reads a whole Double as a Double", listed);
  // Written back as read (a copy, an edit in a tool): still a Double.
  await client.updateEntity({ ...listed[0], rowKey: "a", Count: { value: "8", type: "Int32" } }, "Replace");
  e = await client.getEntity(pk, "a", raw);
  check(types(e) === want && e.Count.value == 8, "a whole Double written back as read stays a Double", e);
  await client.submitTransaction([["create", { partitionKey: pk, rowKey: "b", Whole: { value: "-3", type: "Double" } }]]);
  e = await client.getEntity(pk, "b", raw);
  check(e.Whole?.type === "Double" && e.Whole.value == -3, "a whole Double from a transaction reads as a Double", e);
}

// accessPolicies: a stored access policy without fields comes back as Azure
// gives it, without an AccessPolicy element: the SDK reads {}.
async function accessPolicies() {
  const start = new Date(Date.UTC(2030, 0, 2, 3, 4, 5));
  await client.setAccessPolicy([{ id: "empty" }, { id: "emptyobj", accessPolicy: {} },
    { id: "read", accessPolicy: { permission: "r", start } }]);
  const got = await client.getAccessPolicy();
  const byId = Object.fromEntries(got.map((si) => [si.id, si.accessPolicy]));
  check(JSON.stringify(byId.empty) === "{}" && JSON.stringify(byId.emptyobj) === "{}",
    "a policy without fields reads back as {}", got);
  check(byId.read?.permission === "r" && byId.read?.start?.getTime() === start.getTime() && byId.read.expiry === undefined,
    "a policy with some fields reads back with just those", got);
  await client.setAccessPolicy([]);
}

async function main() {
  await service.createTable(tableName);
  try {
    await singleEntityOperations();
    await transactions();
    await connectionStringsAndSAS();
    await wholeDoubles();
    await accessPolicies();
  } finally {
    await service.deleteTable(tableName);
  }
}

run(main);
