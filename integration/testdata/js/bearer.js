// Drives a pgtables server that trusts a test OpenID Connect issuer with
// @azure/data-tables and credential objects of its own (a TokenCredential
// is any object with getToken): a Storage Table Data Contributor creates a
// table, writes, queries and runs batches; a Reader reads but may not
// write; an identity without a role may do nothing; and a credential whose
// first token the server does not trust learns the tenant from the 401
// challenge and gets a good token for it. Started by
// integration/sdk_bearer_test.go, which passes the tokens (signed by its
// issuer) in the environment and the server's certificate in
// NODE_EXTRA_CA_CERTS: the SDK sends tokens over https only.
"use strict";

const { TableClient, TableServiceClient, odata } = require("@azure/data-tables");
const { check, expectError, run } = require("./checks.js");

const endpoint = process.env.PGTABLES_ENDPOINT;
const tenant = process.env.PGTABLES_TENANT;
const tokens = JSON.parse(process.env.PGTABLES_TOKENS || "{}");
if (!endpoint || !tenant || !tokens.contributor) {
  console.error("set PGTABLES_ENDPOINT, PGTABLES_TENANT and PGTABLES_TOKENS");
  process.exit(2);
}

const options = { retryOptions: { maxRetries: 0 } };
const storageScope = "https://storage.azure.com/.default";
const tableName = "jsbearer" + Date.now().toString(36);

// staticCredential hands out one token and notes what it was asked for.
function staticCredential(token) {
  return {
    calls: [],
    async getToken(scopes, opts) {
      this.calls.push({ scopes: [].concat(scopes), tenantId: opts?.tenantId });
      return { token, expiresOnTimestamp: Date.now() + 3600 * 1000 };
    },
  };
}

// challengedCredential first hands out a token the server refuses (an
// untrusted issuer's); asked again for a tenant, as the SDK's challenge
// handling does, it hands out a good one.
function challengedCredential(refused, good) {
  return {
    calls: [],
    async getToken(scopes, opts) {
      this.calls.push({ scopes: [].concat(scopes), tenantId: opts?.tenantId });
      const token = opts?.tenantId === tenant ? good : refused;
      return { token, expiresOnTimestamp: Date.now() + 3600 * 1000 };
    },
  };
}

async function contributorWrites(service, client) {
  await service.createTable(tableName);
  await client.createEntity({ partitionKey: "p", rowKey: "1", N: 1 });
  await client.upsertEntity({ partitionKey: "p", rowKey: "2", N: 2 }, "Merge");
  const e = await client.getEntity("p", "1");
  check(e.N === 1, "contributor creates and reads an entity", e);
  await client.updateEntity({ partitionKey: "p", rowKey: "1", N: 10 }, "Replace", { etag: e.etag });
  const batch = await client.submitTransaction([
    ["create", { partitionKey: "p", rowKey: "3", N: 3 }],
    ["upsert", { partitionKey: "p", rowKey: "4", N: 4 }, "Replace"],
    ["delete", { partitionKey: "p", rowKey: "2" }],
  ]);
  check(batch.status === 202, "contributor's submitTransaction answers 202", batch.status);
  const rows = [];
  for await (const r of client.listEntities({ queryOptions: { filter: odata`N ge ${3}` } })) {
    rows.push(r.rowKey);
  }
  check(JSON.stringify(rows.sort()) === JSON.stringify(["1", "3", "4"]), "contributor queries with a filter", rows);
}

async function readerReads(readerClient) {
  const e = await readerClient.getEntity("p", "1");
  check(e.N === 10, "reader reads an entity", e);
  await expectError("reader's createEntity", 403, "AuthorizationPermissionMismatch",
    () => readerClient.createEntity({ partitionKey: "p", rowKey: "9" }));
  await expectError("reader's deleteEntity", 403, "AuthorizationPermissionMismatch",
    () => readerClient.deleteEntity("p", "1"));
  await expectError("reader's submitTransaction", 403, "AuthorizationPermissionMismatch",
    () => readerClient.submitTransaction([["create", { partitionKey: "p", rowKey: "8" }]]));
}

async function main() {
  const contributorCred = staticCredential(tokens.contributor);
  const service = new TableServiceClient(endpoint, contributorCred, options);
  const client = new TableClient(endpoint, tableName, contributorCred, options);
  try {
    await contributorWrites(service, client);
    await readerReads(new TableClient(endpoint, tableName, staticCredential(tokens.reader), options));

    const nobody = staticCredential(tokens.none);
    await expectError("createTable without a role", 403, "AuthorizationPermissionMismatch",
      () => new TableServiceClient(endpoint, nobody, options).createTable(tableName + "x"));
    await expectError("getEntity without a role", 403, "AuthorizationPermissionMismatch",
      () => new TableClient(endpoint, tableName, nobody, options).getEntity("p", "1"));

    const challenged = challengedCredential(tokens.foreign, tokens.contributor);
    const e = await new TableClient(endpoint, tableName, challenged, options).getEntity("p", "3");
    check(e.N === 3, "after the 401 challenge the SDK retries with a token for the tenant", e);
    check(challenged.calls.some((c) => c.tenantId === tenant), "the challenge named the tenant", challenged.calls);
    check(contributorCred.calls.every((c) => c.scopes.length === 1 && c.scopes[0] === storageScope),
      "the SDK asks for " + storageScope, contributorCred.calls);
  } finally {
    await service.deleteTable(tableName);
  }
}

run(main);
