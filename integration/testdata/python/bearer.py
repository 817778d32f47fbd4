"""Drives a pgtables server that trusts a test OpenID Connect issuer with the
Python SDK azure-data-tables and credential objects of its own (anything
with get_token): a Storage Table Data Contributor creates a table, writes,
queries and runs a transaction; a Reader reads but may not write; an
identity without a role may do nothing; a credential whose first token the
server refuses learns the tenant from the 401 challenge.

Started by integration/sdk_bearer_test.go with, in the environment:

    PGTABLES_ENDPOINT  https://127.0.0.1:<port>/<account>
    PGTABLES_TENANT    the issuer's tenant id
    PGTABLES_TOKENS    JSON: contributor, reader, none and foreign tokens
    PGTABLES_CA        the server's certificate (the SDK sends tokens over
                       https only)

Every check prints one line; the exit status is 1 when any failed.
"""

import json
import os
import sys
import time
import uuid

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

ENDPOINT = os.environ.get("PGTABLES_ENDPOINT", "")
TENANT = os.environ.get("PGTABLES_TENANT", "")
TOKENS = json.loads(os.environ.get("PGTABLES_TOKENS", "{}"))
CA = os.environ.get("PGTABLES_CA", "")
if not ENDPOINT or not TENANT or not CA or "contributor" not in TOKENS:
    print("set PGTABLES_ENDPOINT, PGTABLES_TENANT, PGTABLES_TOKENS and PGTABLES_CA", file=sys.stderr)
    sys.exit(2)

# No retries, and the test server's certificate trusted.
OPTS = {"retry_total": 0, "connection_verify": CA}
STORAGE_SCOPE = "https://storage.azure.com/.default"
TABLE = "pybearer" + uuid.uuid4().hex[:10]
failed = []


def check(ok, what, detail=None):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok or detail is None else ": " + repr(detail)[:600]))
    if not ok:
        failed.append(what)
    sys.stdout.flush()


def status_and_code(err):
    """The HTTP status and the error code the service sent (header first)."""
    resp = getattr(err, "response", None)
    code = resp.headers.get("x-ms-error-code") if resp is not None else None
    return getattr(err, "status_code", None), code


def refused(what, status, code, fn):
    """Checks that fn raises HttpResponseError with status and code."""
    try:
        fn()
    except HttpResponseError as err:
        got = status_and_code(err)
        check(got == (status, code), "{} is refused with {} {}".format(what, status, code), got)
        return
    check(False, "{} is refused with {} {}".format(what, status, code), "it succeeded")


class Credential:
    """A TokenCredential of one token; with `challenged`, the token of a
    tenant once the SDK asks for that tenant, as after a 401 challenge."""

    def __init__(self, token, challenged=None):
        self.token, self.challenged, self.calls = token, challenged, []

    def get_token(self, *scopes, **kwargs):
        tenant = kwargs.get("tenant_id")
        self.calls.append((scopes, tenant))
        token = self.challenged if self.challenged and tenant == TENANT else self.token
        return AccessToken(token, int(time.time()) + 3600)


def contributor_writes(service, client):
    service.create_table(TABLE)
    client.create_entity({"PartitionKey": "p", "RowKey": "1", "N": 1})
    client.upsert_entity({"PartitionKey": "p", "RowKey": "2", "N": 2}, mode=UpdateMode.MERGE)
    e = client.get_entity("p", "1")
    check(e["N"] == 1, "contributor creates and reads an entity", e)
    client.update_entity({"PartitionKey": "p", "RowKey": "1", "N": 10}, mode=UpdateMode.REPLACE)
    client.submit_transaction(
        [
            ("create", {"PartitionKey": "p", "RowKey": "3", "N": 3}),
            ("upsert", {"PartitionKey": "p", "RowKey": "4", "N": 4}),
            ("delete", {"PartitionKey": "p", "RowKey": "2"}),
        ]
    )
    rows = sorted(e["RowKey"] for e in client.query_entities("N ge @n", parameters={"n": 3}))
    check(rows == ["1", "3", "4"], "contributor's transaction, then a query with a filter", rows)


def main():
    cred = Credential(TOKENS["contributor"])
    service = TableServiceClient(ENDPOINT, credential=cred, **OPTS)
    client = TableClient(ENDPOINT, TABLE, credential=cred, **OPTS)
    try:
        contributor_writes(service, client)
        reader = TableClient(ENDPOINT, TABLE, credential=Credential(TOKENS["reader"]), **OPTS)
        check(reader.get_entity("p", "3")["N"] == 3, "reader reads an entity")
        refused("reader's create_entity", 403, "AuthorizationPermissionMismatch",
                lambda: reader.create_entity({"PartitionKey": "p", "RowKey": "9"}))
        refused("reader's delete_entity", 403, "AuthorizationPermissionMismatch",
                lambda: reader.delete_entity("p", "1"))
        nobody = Credential(TOKENS["none"])
        refused("create_table without a role", 403, "AuthorizationPermissionMismatch",
                lambda: TableServiceClient(ENDPOINT, credential=nobody, **OPTS).create_table(TABLE + "x"))
        challenged = Credential(TOKENS["foreign"], challenged=TOKENS["contributor"])
        e = TableClient(ENDPOINT, TABLE, credential=challenged, **OPTS).get_entity("p", "4")
        check(e["N"] == 4, "after the 401 challenge the SDK retries with a token for the tenant")
        check(any(t == TENANT for _, t in challenged.calls), "the challenge named the tenant", challenged.calls)
        check(all(s == (STORAGE_SCOPE,) for s, _ in cred.calls), "the SDK asks for " + STORAGE_SCOPE, cred.calls)
    finally:
        service.delete_table(TABLE)


if __name__ == "__main__":
    try:
        main()
    except Exception as err:  # pylint: disable=broad-except
        check(False, "unexpected error", err)
    print("all checks passed" if not failed else "{} checks failed".format(len(failed)))
    sys.exit(1 if failed else 0)
