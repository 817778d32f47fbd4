"""Drives a pgtables server with the Python SDK azure-data-tables (12.4.x).

Started by integration/python_interop_test.go with the service URL and the
account in the environment:

    PGTABLES_ENDPOINT  http://127.0.0.1:<port>/<account>  (an IP address, never
                       "localhost": with it some SDKs switch to Cosmos DB mode)
    PGTABLES_ACCOUNT   the account name
    PGTABLES_KEY       its base64 key

Every check prints one line ("ok   ..." or "FAIL ..."); all checks run, the
failures are listed again at the end, and the exit status is 1 when any
failed. Only the standard library and azure-data-tables are needed.

What Azure does is the reference: where this file expects something, it is
what the Table service answers (rest-protocol.md in the spec, the SDK's own
source), not merely what pgtables answers today.
"""

import base64
import json
import math
import os
import sys
import time
import traceback
import uuid
from datetime import datetime, timedelta, timezone

from azure.core import MatchConditions
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import (
    AccountSasPermissions,
    EdmType,
    EntityProperty,
    ResourceTypes,
    TableAccessPolicy,
    TableAnalyticsLogging,
    TableClient,
    TableCorsRule,
    TableMetrics,
    TableRetentionPolicy,
    TableSasPermissions,
    TableServiceClient,
    TableTransactionError,
    UpdateMode,
    generate_account_sas,
    generate_table_sas,
)

ENDPOINT = os.environ.get("PGTABLES_ENDPOINT", "")
ACCOUNT = os.environ.get("PGTABLES_ACCOUNT", "")
KEY = os.environ.get("PGTABLES_KEY", "")
if not ENDPOINT or not ACCOUNT or not KEY:
    print("set PGTABLES_ENDPOINT, PGTABLES_ACCOUNT and PGTABLES_KEY", file=sys.stderr)
    sys.exit(2)
if "localhost" in ENDPOINT:
    print("PGTABLES_ENDPOINT must use an IP address, not localhost", file=sys.stderr)
    sys.exit(2)

# No retries: a failure must show at once, not after back-off.
OPTS = {"retry_total": 0}
CRED = AzureNamedKeyCredential(ACCOUNT, KEY)
CONN_STR = (
    "DefaultEndpointsProtocol=http;AccountName={};AccountKey={};TableEndpoint={};".format(
        ACCOUNT, KEY, ENDPOINT
    )
)
SERVICE = TableServiceClient(ENDPOINT, credential=CRED, **OPTS)
RUN = "py" + uuid.uuid4().hex[:10]
UTC = timezone.utc

# A weak ETag that never matches: the shape Azure gives, an instant long past.
STALE_ETAG = "W/\"datetime'2020-01-01T00%3A00%3A00.0000000Z'\""

failures = []
section = "main"
created_tables = []


# ---------------------------------------------------------------- helpers


def check(ok, what, detail=None):
    name = "{}: {}".format(section, what)
    if ok:
        print("ok   " + name)
    else:
        failures.append(name)
        print("FAIL " + (name if detail is None else "{}: {}".format(name, short(detail))))
    sys.stdout.flush()
    return ok


def short(x, n=700):
    s = x if isinstance(x, str) else repr(x)
    return s if len(s) <= n else s[:n] + "..."


def table_name(suffix):
    name = RUN + suffix
    created_tables.append(name)
    return name


def new_table(suffix):
    """Creates a table with a name unique to this run and returns its client."""
    name = table_name(suffix)
    SERVICE.create_table(name)
    return SERVICE.get_table_client(name)


def body_code(err):
    """The error code as the service sent it: the x-ms-error-code header, else
    odata.error.code in the JSON body."""
    resp = getattr(err, "response", None)
    if resp is None:
        return None
    code = resp.headers.get("x-ms-error-code")
    if code:
        return code
    try:
        return json.loads(resp.text())["odata.error"]["code"]
    except Exception:  # pylint: disable=broad-except
        return None


def code_of(err):
    """The error code a user reads: the SDK's decoded error_code where the SDK
    decodes the error, else what the service sent (create_entity in 12.4.x
    re-raises the undecoded error, whose error_code attribute is absent)."""
    code = getattr(err, "error_code", None)
    if code is not None:
        return getattr(code, "value", code)
    return body_code(err)


def describe(err):
    """What a failure report needs of an exception: its type, the status,
    the code as the SDK decoded it and as the service sent it, the request
    and the response body."""
    code = getattr(err, "error_code", None)
    d = {
        "type": type(err).__name__,
        "status": getattr(err, "status_code", None),
        "sdk_error_code": getattr(code, "value", code),
        "service_code": body_code(err),
    }
    resp = getattr(err, "response", None)
    if resp is not None:
        req = getattr(resp, "request", None)
        if req is not None:
            d["request"] = "{} {}".format(req.method, req.url)
        try:
            d["body"] = resp.text()[:600]
        except Exception:  # pylint: disable=broad-except
            pass
    else:
        d["message"] = str(err)[:200]
    return d


def expect_error(what, fn, exc=HttpResponseError, status=None, code=None, index=None):
    """Runs fn and checks that it raises exc with the HTTP status and error
    code given (None: not checked). Returns the exception or None."""
    try:
        fn()
    except Exception as err:  # pylint: disable=broad-except
        ok = isinstance(err, exc)
        if status is not None:
            ok = ok and getattr(err, "status_code", None) == status
        if code is not None:
            ok = ok and code_of(err) == code
        if index is not None:
            ok = ok and getattr(err, "index", None) == index
        wanted = " ".join(
            str(x)
            for x in (exc.__name__, status, code, None if index is None else "index %d" % index)
            if x is not None
        )
        d = describe(err)
        if index is not None:
            d["index"] = getattr(err, "index", None)
        check(ok, "{} raises {}".format(what, wanted), d)
        return err
    check(False, "{} raises {}".format(what, exc.__name__), "it succeeded")
    return None


def exists(client, pk, rk):
    try:
        client.get_entity(pk, rk)
        return True
    except ResourceNotFoundError:
        return False


def keys(entities):
    return [(e["PartitionKey"], e["RowKey"]) for e in entities]


def is_int64(v, value):
    return isinstance(v, EntityProperty) and v.edm_type == EdmType.INT64 and v.value == value


def is_float(v, value):
    if type(v) is not float:  # pylint: disable=unidiomatic-typecheck
        return False
    if math.isnan(value):
        return math.isnan(v)
    return v == value and math.copysign(1, v) == math.copysign(1, value)


def is_utc_datetime(v, value):
    return (
        isinstance(v, datetime)
        and v.tzinfo is not None
        and v.utcoffset() == timedelta(0)
        and v == value
    )


def type_desc(v):
    if isinstance(v, EntityProperty):
        return "EntityProperty({!r}, {})".format(v.value, v.edm_type)
    return "{}({!r})".format(type(v).__name__, v)


def run(name, fn):
    global section  # pylint: disable=global-statement
    section = name
    start = time.time()
    try:
        fn()
    except Exception as err:  # pylint: disable=broad-except
        print(traceback.format_exc())
        check(False, "unexpected exception, the rest of the section did not run", describe(err))
    print("     ({} took {:.1f}s)".format(name, time.time() - start))


# ----------------------------------------------------------------- tables


def tables():
    from_conn = TableServiceClient.from_connection_string(CONN_STR, **OPTS)
    by_cred = TableServiceClient(ENDPOINT, credential=CRED, **OPTS)

    a = table_name("tabA")
    b = table_name("tabB")
    item = from_conn.create_table(a)
    check(item.table_name == a, "create_table with a connection-string client", item.table_name)
    by_cred.create_table(b)
    check(True, "create_table with an endpoint and AzureNamedKeyCredential")

    names = [t.name for t in by_cred.list_tables()]
    check(a in names and b in names, "list_tables lists both tables", names)
    names = [t.name for t in from_conn.list_tables()]
    check(a in names and b in names, "list_tables through the connection string", names)

    got = [t.name for t in by_cred.query_tables("TableName eq @n", parameters={"n": a})]
    check(got == [a], "query_tables by name with parameters", got)
    got = [
        t.name
        for t in by_cred.query_tables(
            "TableName ge @lo and TableName lt @hi",
            parameters={"lo": RUN + "tab", "hi": RUN + "tac"},
        )
    ]
    check(got == [a, b], "query_tables by a name range, in name order", got)

    # Paging over tables: two per page.
    c = table_name("tabC")
    by_cred.create_table(c)
    pager = by_cred.query_tables(
        "TableName ge @lo and TableName lt @hi",
        parameters={"lo": RUN + "tab", "hi": RUN + "tac"},
        results_per_page=2,
    ).by_page()
    pages, tokens = [], []
    for page in pager:
        pages.append([t.name for t in page])
        tokens.append(pager.continuation_token)
    check(
        pages == [[a, b], [c]] and tokens[0] is not None and tokens[-1] is None,
        "query_tables with results_per_page=2 pages with a continuation token",
        {"pages": pages, "tokens": tokens},
    )

    # Names keep their case; lookups ignore it.
    mixed = table_name("MiXed")
    by_cred.create_table(mixed)
    got = [t.name for t in by_cred.query_tables("TableName eq @n", parameters={"n": mixed})]
    check(got == [mixed], "a table name keeps its case", got)
    TableClient(ENDPOINT, mixed.lower(), credential=CRED, **OPTS).create_entity({"PartitionKey": "p", "RowKey": "r"})
    check(exists(by_cred.get_table_client(mixed.upper()), "p", "r"), "table names are case-insensitive for entities")
    by_cred.delete_table(mixed.lower())
    check(mixed not in [t.name for t in by_cred.list_tables()], "delete_table in other case")

    expect_error(
        "create_table of an existing table (service client)",
        lambda: by_cred.create_table(a),
        ResourceExistsError, 409, "TableAlreadyExists",
    )
    expect_error(
        "create_table of an existing table (TableClient)",
        lambda: TableClient(ENDPOINT, a, credential=CRED, **OPTS).create_table(),
        ResourceExistsError, 409, "TableAlreadyExists",
    )
    expect_error(
        "create_table of an existing name in other case",
        lambda: by_cred.create_table(a.upper()),
        ResourceExistsError, 409, "TableAlreadyExists",
    )
    by_cred.create_table_if_not_exists(a)
    check(True, "create_table_if_not_exists of an existing table")

    # The SDK turns these service errors (InvalidResourceName and
    # OutOfRangeInput with Azure's messages) into ValueError.
    expect_error("create_table named '1abc'", lambda: by_cred.create_table("1abc"), ValueError)
    expect_error("create_table named 'ab'", lambda: by_cred.create_table("ab"), ValueError)

    missing = RUN + "missing"
    mc = by_cred.get_table_client(missing)
    expect_error(
        "get_entity in a missing table", lambda: mc.get_entity("p", "r"),
        ResourceNotFoundError, 404, "TableNotFound",
    )
    expect_error(
        "list_entities of a missing table", lambda: list(mc.list_entities()),
        ResourceNotFoundError, 404, "TableNotFound",
    )
    expect_error(
        "create_entity in a missing table",
        lambda: mc.create_entity({"PartitionKey": "p", "RowKey": "r"}),
        ResourceNotFoundError, 404, "TableNotFound",
    )
    expect_error(
        "get_table_access_policy of a missing table", lambda: mc.get_table_access_policy(),
        ResourceNotFoundError, 404,
    )
    # Azure answers 404 ResourceNotFound; the SDK swallows it.
    by_cred.delete_table(missing)
    check(True, "delete_table of a missing table does not raise")

    from_conn.delete_table(a)
    by_cred.get_table_client(b).delete_table()
    by_cred.delete_table(c)
    names = [t.name for t in by_cred.list_tables()]
    check(a not in names and b not in names and c not in names, "delete_table removes the tables", names)
    expect_error(
        "get_entity in a deleted table",
        lambda: by_cred.get_table_client(a).get_entity("p", "r"),
        ResourceNotFoundError, 404, "TableNotFound",
    )


# --------------------------------------------------------------- entities


def entities():
    name = new_table("ent").table_name
    # Three ways to the same table: the others are checked once below.
    t = TableClient.from_connection_string(CONN_STR, name, **OPTS)
    by_cred = TableClient(ENDPOINT, name, credential=CRED, **OPTS)
    by_url = TableClient.from_table_url("{}/{}".format(ENDPOINT, name), credential=CRED, **OPTS)
    pk = "p"
    by_cred.create_entity({"PartitionKey": pk, "RowKey": "viaCred"})
    check(by_url.get_entity(pk, "viaCred")["RowKey"] == "viaCred",
          "TableClient with a credential and TableClient.from_table_url")
    by_url.delete_entity(pk, "viaCred")

    meta = t.create_entity({"PartitionKey": pk, "RowKey": "a", "Name": "first", "N": 1})
    e = t.get_entity(pk, "a")
    check(
        e["Name"] == "first" and e["N"] == 1 and e["PartitionKey"] == pk and e["RowKey"] == "a",
        "create_entity then get_entity", dict(e),
    )
    etag = e.metadata["etag"]
    check(
        isinstance(etag, str) and etag.startswith('W/"'),
        "get_entity gives a weak ETag", e.metadata,
    )
    check(meta.get("etag") == etag, "create_entity returns the stored ETag", {"created": meta, "got": etag})
    ts = e.metadata.get("timestamp")
    check(
        isinstance(ts, datetime) and abs((datetime.now(UTC) - ts).total_seconds()) < 300,
        "get_entity gives the Timestamp as a UTC datetime", ts,
    )

    expect_error(
        "create_entity of a duplicate",
        lambda: t.create_entity({"PartitionKey": pk, "RowKey": "a"}),
        ResourceExistsError, 409, "EntityAlreadyExists",
    )
    expect_error(
        "get_entity of a missing entity", lambda: t.get_entity(pk, "nope"),
        ResourceNotFoundError, 404, "ResourceNotFound",
    )

    # update_entity MERGE with the ETag keeps and adds.
    m = t.update_entity(
        {"PartitionKey": pk, "RowKey": "a", "Extra": True},
        mode=UpdateMode.MERGE, etag=etag, match_condition=MatchConditions.IfNotModified,
    )
    e = t.get_entity(pk, "a")
    check(
        e["Name"] == "first" and e["N"] == 1 and e["Extra"] is True,
        "update_entity MERGE with IfNotModified and the ETag", dict(e),
    )
    check(
        m.get("etag") == e.metadata["etag"] and m.get("etag") != etag,
        "update_entity returns the new ETag", {"returned": m, "stored": e.metadata["etag"]},
    )
    expect_error(
        "update_entity MERGE with the now stale ETag",
        lambda: t.update_entity(
            {"PartitionKey": pk, "RowKey": "a", "X": 1},
            mode=UpdateMode.MERGE, etag=etag, match_condition=MatchConditions.IfNotModified,
        ),
        ResourceModifiedError, 412, "UpdateConditionNotSatisfied",
    )
    expect_error(
        "update_entity REPLACE with a stale ETag",
        lambda: t.update_entity(
            {"PartitionKey": pk, "RowKey": "a", "X": 1},
            mode=UpdateMode.REPLACE, etag=STALE_ETAG, match_condition=MatchConditions.IfNotModified,
        ),
        ResourceModifiedError, 412, "UpdateConditionNotSatisfied",
    )
    e = t.get_entity(pk, "a")
    check("X" not in e, "the refused updates changed nothing", dict(e))

    # update_entity MERGE without a condition (If-Match: *).
    t.update_entity({"PartitionKey": pk, "RowKey": "a", "M": "merged"}, mode=UpdateMode.MERGE)
    e = t.get_entity(pk, "a")
    check(e["Name"] == "first" and e["M"] == "merged", "update_entity MERGE unconditionally", dict(e))

    # update_entity REPLACE with the current ETag drops the rest.
    t.update_entity(
        {"PartitionKey": pk, "RowKey": "a", "Name": "second"},
        mode=UpdateMode.REPLACE, etag=e.metadata["etag"], match_condition=MatchConditions.IfNotModified,
    )
    e = t.get_entity(pk, "a")
    check(
        e["Name"] == "second" and "N" not in e and "Extra" not in e and "M" not in e,
        "update_entity REPLACE with IfNotModified and the ETag", dict(e),
    )
    # The ETag kept in the entity's metadata is used when none is given.
    t.update_entity(e, mode=UpdateMode.REPLACE, match_condition=MatchConditions.IfNotModified)
    check(True, "update_entity of a read entity with IfNotModified uses its ETag")
    expect_error(
        "update_entity of the same read entity again (its ETag is stale now)",
        lambda: t.update_entity(e, mode=UpdateMode.MERGE, match_condition=MatchConditions.IfNotModified),
        ResourceModifiedError, 412, "UpdateConditionNotSatisfied",
    )
    t.update_entity({"PartitionKey": pk, "RowKey": "a", "Name": "fourth"}, mode=UpdateMode.REPLACE)
    e = t.get_entity(pk, "a")
    check(e["Name"] == "fourth" and len([k for k in e if k not in ("PartitionKey", "RowKey")]) == 1,
          "update_entity REPLACE unconditionally", dict(e))

    expect_error(
        "update_entity of a missing entity",
        lambda: t.update_entity({"PartitionKey": pk, "RowKey": "nope", "V": 1}, mode=UpdateMode.MERGE),
        ResourceNotFoundError, 404, "ResourceNotFound",
    )
    check(not exists(t, pk, "nope"), "update_entity of a missing entity did not create it")

    # upsert_entity, both modes, creating and updating.
    t.upsert_entity({"PartitionKey": pk, "RowKey": "b", "V": 1, "W": 1}, mode=UpdateMode.REPLACE)
    e = t.get_entity(pk, "b")
    check(e["V"] == 1 and e["W"] == 1, "upsert_entity REPLACE inserts", dict(e))
    t.upsert_entity({"PartitionKey": pk, "RowKey": "b", "X": 2}, mode=UpdateMode.MERGE)
    e = t.get_entity(pk, "b")
    check(e["V"] == 1 and e["W"] == 1 and e["X"] == 2, "upsert_entity MERGE merges", dict(e))
    t.upsert_entity({"PartitionKey": pk, "RowKey": "b", "Y": 3}, mode=UpdateMode.REPLACE)
    e = t.get_entity(pk, "b")
    check(e["Y"] == 3 and "V" not in e and "X" not in e, "upsert_entity REPLACE replaces", dict(e))
    m = t.upsert_entity({"PartitionKey": pk, "RowKey": "c", "Z": 4}, mode=UpdateMode.MERGE)
    e = t.get_entity(pk, "c")
    check(e["Z"] == 4 and m.get("etag") == e.metadata["etag"], "upsert_entity MERGE inserts and returns the ETag",
          {"entity": dict(e), "returned": m})

    # A merge whose property is None leaves the stored property alone.
    t.update_entity({"PartitionKey": pk, "RowKey": "b", "Y": None, "Q": 5}, mode=UpdateMode.MERGE)
    e = t.get_entity(pk, "b")
    check(e.get("Y") == 3 and e.get("Q") == 5, "update_entity MERGE with a None property keeps it", dict(e))

    # delete_entity.
    e = t.get_entity(pk, "b")
    expect_error(
        "delete_entity with a stale ETag",
        lambda: t.delete_entity(pk, "b", etag=STALE_ETAG, match_condition=MatchConditions.IfNotModified),
        ResourceModifiedError, 412, "UpdateConditionNotSatisfied",
    )
    check(exists(t, pk, "b"), "the refused delete deleted nothing")
    t.delete_entity(pk, "b", etag=e.metadata["etag"], match_condition=MatchConditions.IfNotModified)
    check(not exists(t, pk, "b"), "delete_entity with IfNotModified and the ETag")
    e = t.get_entity(pk, "c")
    t.delete_entity(e, match_condition=MatchConditions.IfNotModified)
    check(not exists(t, pk, "c"), "delete_entity of a read entity with IfNotModified uses its ETag")
    t.delete_entity(pk, "a")
    check(not exists(t, pk, "a"), "delete_entity unconditionally")
    # Azure answers 404 ResourceNotFound; the SDK swallows it.
    t.delete_entity(pk, "a")
    check(True, "delete_entity of a missing entity does not raise")


# -------------------------------------------------------------- EDM types

DT_MICRO = datetime(2024, 2, 29, 13, 14, 15, 123456, tzinfo=UTC)
DT_WHOLE = datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC)
DT_OLD = datetime(1601, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
DT_OFFSET = datetime(2030, 6, 1, 12, 0, 0, 500000, tzinfo=timezone(timedelta(hours=2)))
GUID = uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833")
ALL_BYTES = bytes(range(256))
BIG64 = 2 ** 53 + 1


def typed_entity(pk, rk):
    return {
        "PartitionKey": pk,
        "RowKey": rk,
        "Str": "plain",
        "StrEmpty": "",
        "StrUnicode": "h\u00e9llo \U0001F600\U0001D11E \u4e2d",
        "StrNul": "a\x00b",
        "StrCtl": "tab\tnl\ncr\r\x01\x1f\u2028",
        "StrJSON": "{\"odata.type\":\"x\"} \\ / '",
        "BoolT": True,
        "BoolF": False,
        "Int": 42,
        "IntZero": 0,
        "IntMax": 2 ** 31 - 1,
        "IntMin": -(2 ** 31),
        "I64Big": EntityProperty(BIG64, EdmType.INT64),
        "I64Max": EntityProperty(2 ** 63 - 1, EdmType.INT64),
        "I64Min": EntityProperty(-(2 ** 63), EdmType.INT64),
        "I64Small": EntityProperty(7, EdmType.INT64),
        "Dbl": 1.5,
        "DblWhole": 5.0,
        "DblZero": 0.0,
        "DblNegZero": -0.0,
        "DblNegWhole": -2.0,
        "DblHuge": 1e300,
        "DblE20": 1e20,
        "DblTiny": 5e-324,
        "DblMax": 1.7976931348623157e308,
        "DblBeyondInt32": 3000000000.0,
        "DblNaN": float("nan"),
        "DblInf": float("inf"),
        "DblNegInf": float("-inf"),
        "When": DT_MICRO,
        "WhenWhole": DT_WHOLE,
        "WhenOld": DT_OLD,
        "WhenOffset": DT_OFFSET,
        "Id": GUID,
        "Bin": ALL_BYTES,
        "BinEmpty": b"",
        "Nothing": None,
    }


def expected_checks():
    """(property, predicate, what) triples for a read-back typed entity."""
    return [
        ("Str", lambda v: type(v) is str and v == "plain", "str"),
        ("StrEmpty", lambda v: type(v) is str and v == "", "empty str"),
        ("StrUnicode", lambda v: v == "h\u00e9llo \U0001F600\U0001D11E \u4e2d", "str with non-BMP characters"),
        ("StrNul", lambda v: v == "a\x00b", "str with U+0000 inside"),
        ("StrCtl", lambda v: v == "tab\tnl\ncr\r\x01\x1f\u2028", "str with control characters"),
        ("StrJSON", lambda v: v == "{\"odata.type\":\"x\"} \\ / '", "str with JSON syntax"),
        ("BoolT", lambda v: v is True, "bool True"),
        ("BoolF", lambda v: v is False, "bool False"),
        ("Int", lambda v: type(v) is int and v == 42, "int (Int32)"),
        ("IntZero", lambda v: type(v) is int and v == 0, "int 0"),
        ("IntMax", lambda v: type(v) is int and v == 2 ** 31 - 1, "int 2^31-1"),
        ("IntMin", lambda v: type(v) is int and v == -(2 ** 31), "int -2^31"),
        ("I64Big", lambda v: is_int64(v, BIG64), "Int64 2^53+1"),
        ("I64Max", lambda v: is_int64(v, 2 ** 63 - 1), "Int64 max"),
        ("I64Min", lambda v: is_int64(v, -(2 ** 63)), "Int64 min"),
        ("I64Small", lambda v: is_int64(v, 7), "Int64 7 stays Int64"),
        ("Dbl", lambda v: is_float(v, 1.5), "float 1.5"),
        ("DblWhole", lambda v: is_float(v, 5.0), "float 5.0 (whole number)"),
        ("DblZero", lambda v: is_float(v, 0.0), "float 0.0"),
        ("DblNegZero", lambda v: is_float(v, -0.0), "float -0.0"),
        ("DblNegWhole", lambda v: is_float(v, -2.0), "float -2.0"),
        ("DblHuge", lambda v: is_float(v, 1e300), "float 1e300"),
        ("DblE20", lambda v: is_float(v, 1e20), "float 1e20"),
        ("DblTiny", lambda v: is_float(v, 5e-324), "float 5e-324"),
        ("DblMax", lambda v: is_float(v, 1.7976931348623157e308), "float max"),
        ("DblBeyondInt32", lambda v: is_float(v, 3000000000.0), "float 3e9 (whole, beyond Int32)"),
        ("DblNaN", lambda v: is_float(v, float("nan")), "float nan"),
        ("DblInf", lambda v: is_float(v, float("inf")), "float inf"),
        ("DblNegInf", lambda v: is_float(v, float("-inf")), "float -inf"),
        ("When", lambda v: is_utc_datetime(v, DT_MICRO), "datetime with microseconds"),
        ("WhenWhole", lambda v: is_utc_datetime(v, DT_WHOLE), "datetime in whole seconds"),
        ("WhenOld", lambda v: is_utc_datetime(v, DT_OLD), "datetime 1601-01-01"),
        ("WhenOffset", lambda v: is_utc_datetime(v, DT_OFFSET), "datetime given at +02:00"),
        ("Id", lambda v: isinstance(v, uuid.UUID) and v == GUID, "uuid.UUID (Edm.Guid)"),
        ("Bin", lambda v: type(v) is bytes and v == ALL_BYTES, "bytes, all 256 values"),
        ("BinEmpty", lambda v: type(v) is bytes and v == b"", "empty bytes"),
    ]


def check_typed(e, how):
    for prop, pred, what in expected_checks():
        if prop not in e:
            check(False, "{}: {}".format(how, what), "property {} missing".format(prop))
            continue
        v = e[prop]
        ok = False
        try:
            ok = pred(v)
        except Exception:  # pylint: disable=broad-except
            ok = False
        check(ok, "{}: {}".format(how, what), type_desc(v))
    check("Nothing" not in e, "{}: a None property is absent".format(how), sorted(e.keys()))
    dt = e.get("When")
    check(
        getattr(dt, "tables_service_value", "").startswith("2024-02-29T13:14:15.123456"),
        "{}: the datetime keeps the service's text (TablesEntityDatetime)".format(how),
        getattr(dt, "tables_service_value", None),
    )


def edm_types():
    t = new_table("edm")
    t.create_entity(typed_entity("p", "created"))
    t.upsert_entity(typed_entity("p", "upsertreplace"), mode=UpdateMode.REPLACE)
    t.upsert_entity(typed_entity("p", "upsertmerge"), mode=UpdateMode.MERGE)
    t.submit_transaction([("create", typed_entity("p", "transaction"))])

    check_typed(t.get_entity("p", "created"), "get_entity")
    check_typed(t.get_entity("p", "upsertreplace"), "get_entity after upsert REPLACE")
    check_typed(t.get_entity("p", "upsertmerge"), "get_entity after upsert MERGE")
    check_typed(t.get_entity("p", "transaction"), "get_entity after a transaction insert")
    listed = {e["RowKey"]: e for e in t.list_entities()}
    check(len(listed) == 4, "list_entities lists the four entities", sorted(listed))
    if "created" in listed:
        check_typed(listed["created"], "list_entities")
    queried = list(t.query_entities("RowKey eq @rk", parameters={"rk": "created"}))
    check(len(queried) == 1, "query_entities finds the entity", len(queried))
    if queried:
        check_typed(queried[0], "query_entities")

    # A read entity written back unchanged keeps every type.
    e = t.get_entity("p", "created")
    e["RowKey"] = "roundtrip"
    t.create_entity(e)
    check_typed(t.get_entity("p", "roundtrip"), "get_entity of a read entity written back")

    # A Python int beyond Int32. Azure's wire format would need Edm.Int64;
    # azure-data-tables 12.4.x refuses it before sending (TypeError), later
    # versions send it as Int64. Either way it must never come back wrong.
    big = 2 ** 40 + 3
    try:
        t.create_entity({"PartitionKey": "p", "RowKey": "pyint", "Big": big, "Neg": -big})
    except TypeError as err:
        check(True, "a Python int beyond Int32 is refused by this SDK version ({})".format(err))
    else:
        e = t.get_entity("p", "pyint")
        check(is_int64(e.get("Big"), big) and is_int64(e.get("Neg"), -big),
              "a Python int beyond Int32 comes back as Int64", {k: type_desc(v) for k, v in e.items()})

    # Explicitly typed values the SDK annotates (EntityProperty with each EdmType).
    t.create_entity({
        "PartitionKey": "p", "RowKey": "explicit",
        "S": EntityProperty("123", EdmType.STRING),
        "I": EntityProperty(123, EdmType.INT32),
        "B": EntityProperty(True, EdmType.BOOLEAN),
        "D": EntityProperty(2.0, EdmType.DOUBLE),
        "G": EntityProperty(GUID, EdmType.GUID),
        "T": EntityProperty(DT_MICRO, EdmType.DATETIME),
        "X": EntityProperty(b"\x00\xff", EdmType.BINARY),
    })
    e = t.get_entity("p", "explicit")
    check(e.get("S") == "123" and type(e.get("S")) is str, "EntityProperty Edm.String '123' stays a str", type_desc(e.get("S")))
    check(e.get("I") == 123 and type(e.get("I")) is int, "EntityProperty Edm.Int32", type_desc(e.get("I")))
    check(e.get("B") is True, "EntityProperty Edm.Boolean", type_desc(e.get("B")))
    check(is_float(e.get("D"), 2.0), "EntityProperty Edm.Double 2.0", type_desc(e.get("D")))
    check(e.get("G") == GUID, "EntityProperty Edm.Guid", type_desc(e.get("G")))
    check(is_utc_datetime(e.get("T"), DT_MICRO), "EntityProperty Edm.DateTime", type_desc(e.get("T")))
    check(e.get("X") == b"\x00\xff", "EntityProperty Edm.Binary", type_desc(e.get("X")))

    # Merge changes a property's type.
    t.update_entity({"PartitionKey": "p", "RowKey": "explicit", "I": "now a string", "S": 9.0},
                    mode=UpdateMode.MERGE)
    e = t.get_entity("p", "explicit")
    check(e.get("I") == "now a string" and is_float(e.get("S"), 9.0),
          "update_entity MERGE changes property types", {k: type_desc(e.get(k)) for k in ("I", "S")})

    # select: only the asked-for properties; one the entity lacks comes back
    # as None (Azure sends "Prop":null).
    e = t.get_entity("p", "created", select=["Int", "DblWhole", "Lacking"])
    props = sorted(k for k in e.keys())
    check(
        set(props) - {"PartitionKey", "RowKey"} == {"Int", "DblWhole", "Lacking"},
        "get_entity with select gives only the selected properties", props,
    )
    check(e.get("Int") == 42 and is_float(e.get("DblWhole"), 5.0) and e.get("Lacking", "absent") is None,
          "get_entity with select: values, and None for a missing property",
          {k: type_desc(v) for k, v in e.items()})


# ------------------------------------------------------------------- keys

AWKWARD_KEYS = [
    "O'Neil",
    "''",
    "a'",
    "'",
    "with space",
    "trailing space ",
    "plus+sign",
    "100%",
    "%27%2F%20",
    "(a,b)=c",
    "@$!*;:~,&=[]{}",
    "\u00fc\u00f1\u00ee\u00e7\u00f8d\u00e9",
    "\U0001F600\U0001D11E",
    "\u4e2d\u6587",
    "--changesetresponse_x",
    "dots.and-dashes_",
    "",
]


def awkward_keys():
    t = new_table("keys")
    for i, k in enumerate(AWKWARD_KEYS):
        what = "key {!r}".format(k)
        pk = k
        rk = k + "r"
        t.create_entity({"PartitionKey": pk, "RowKey": rk, "I": i})
        try:
            e = t.get_entity(pk, rk)
            check(e.get("I") == i and e.get("RowKey") == rk, what + ": create then get", dict(e))
        except Exception as err:  # pylint: disable=broad-except
            check(False, what + ": create then get", describe(err))
            continue
        t.update_entity({"PartitionKey": pk, "RowKey": rk, "U": "merged"}, mode=UpdateMode.MERGE,
                        etag=e.metadata["etag"], match_condition=MatchConditions.IfNotModified)
        t.upsert_entity({"PartitionKey": pk, "RowKey": rk, "V": 1}, mode=UpdateMode.MERGE)
        e = t.get_entity(pk, rk)
        check(e.get("U") == "merged" and e.get("V") == 1 and e.get("I") == i, what + ": update and upsert", dict(e))
        got = list(t.query_entities("PartitionKey eq @pk and RowKey eq @rk", parameters={"pk": pk, "rk": rk}))
        check(len(got) == 1 and got[0].get("I") == i, what + ": query with parameters", [dict(x) for x in got])
        res = t.submit_transaction([
            ("upsert", {"PartitionKey": pk, "RowKey": rk, "W": 2}, {"mode": UpdateMode.MERGE}),
            ("create", {"PartitionKey": pk, "RowKey": rk + "2"}),
            ("upsert", {"PartitionKey": pk, "RowKey": rk + "3"}),
        ])
        e = t.get_entity(pk, rk)
        check(len(res) == 3 and e.get("W") == 2 and exists(t, pk, rk + "2") and exists(t, pk, rk + "3"),
              what + ": in a transaction", {"result": res, "entity": dict(e)})
        t.delete_entity(pk, rk, etag=e.metadata["etag"], match_condition=MatchConditions.IfNotModified)
        t.submit_transaction([("delete", {"PartitionKey": pk, "RowKey": rk + "2"}),
                              ("delete", {"PartitionKey": pk, "RowKey": rk + "3"})])
        check(not exists(t, pk, rk) and not exists(t, pk, rk + "2") and not exists(t, pk, rk + "3"),
              what + ": delete, alone and in a transaction")

    # Ordering of keys: by code point (UTF-16 code units in Azure; the two
    # orders agree for these keys).
    keys_in = ["b", "a", "B", "A", "a b", "ab", "\u00e9", "~", "0", "10", "9"]
    t.submit_transaction([("create", {"PartitionKey": "order", "RowKey": k}) for k in keys_in])
    got = [e["RowKey"] for e in t.query_entities("PartitionKey eq 'order'")]
    check(got == sorted(keys_in), "entities come back in ordinal RowKey order", got)


# ---------------------------------------------------------------- queries


def queries():
    t = new_table("query")
    base = datetime(2024, 1, 1, 12, 0, 0, 250000, tzinfo=UTC)
    rows = []
    for i in range(10):
        rows.append({
            "PartitionKey": "q",
            "RowKey": "r%02d" % i,
            "Name": "O'Neil" if i == 3 else "name %d" % i,
            "N": i * 10,
            "Big": EntityProperty(2 ** 40 + i, EdmType.INT64),
            "F": i + 0.5,
            "W": float(i),
            "When": base + timedelta(days=i),
            "G": uuid.UUID(int=i + 1),
            "Bin": bytes([i, 255 - i]),
            "Flag": i % 2 == 0,
        })
    t.submit_transaction([("create", r) for r in rows])
    t.create_entity({"PartitionKey": "other", "RowKey": "r05", "N": 50})

    def rks(q, **kw):
        return [e["RowKey"] for e in t.query_entities(q, **kw)]

    cases = [
        ("string with a quote", "Name eq @v", {"v": "O'Neil"}, ["r03"]),
        ("string range", "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi",
         {"pk": "q", "lo": "r02", "hi": "r05"}, ["r02", "r03", "r04"]),
        ("int", "PartitionKey eq @pk and N eq @v", {"pk": "q", "v": 70}, ["r07"]),
        ("int gt", "PartitionKey eq @pk and N gt @v", {"pk": "q", "v": 75}, ["r08", "r09"]),
        ("int64 (sent with L)", "Big eq @v", {"v": 2 ** 40 + 4}, ["r04"]),
        ("int64 ge", "Big ge @v", {"v": 2 ** 40 + 8}, ["r08", "r09"]),
        ("float", "F eq @v", {"v": 2.5}, ["r02"]),
        ("float lt", "F lt @v", {"v": 1.75}, ["r00", "r01"]),
        ("whole float", "W eq @v", {"v": 6.0}, ["r06"]),
        ("int against a Double property (widening)", "W eq @v", {"v": 6}, ["r06"]),
        ("datetime", "When eq @v", {"v": base + timedelta(days=5)}, ["r05"]),
        ("datetime gt", "When gt @v", {"v": base + timedelta(days=7, seconds=1)}, ["r08", "r09"]),
        ("guid", "G eq @v", {"v": uuid.UUID(int=3)}, ["r02"]),
        ("bytes", "Bin eq @v", {"v": bytes([6, 249])}, ["r06"]),
        ("bool true", "PartitionKey eq @pk and Flag eq @v", {"pk": "q", "v": True},
         ["r00", "r02", "r04", "r06", "r08"]),
        ("bool false and int", "Flag eq @f and N ge @n", {"f": False, "n": 50}, ["r05", "r07", "r09"]),
        # The SDK substitutes only whole space-separated words: "@b )", not "@b)".
        ("or / not", "PartitionKey eq @pk and (N eq @a or N eq @b ) and not (RowKey eq @c )",
         {"pk": "q", "a": 10, "b": 20, "c": "r02"}, ["r01"]),
        ("type mismatch never matches with eq", "N eq @v", {"v": "10"}, []),
        ("a missing property never matches", "Missing eq @v", {"v": 1}, []),
    ]
    for what, q, params, want in cases:
        try:
            got = rks(q, parameters=params)
        except Exception as err:  # pylint: disable=broad-except
            check(False, "query_entities with parameters: " + what, describe(err))
            continue
        check(got == want, "query_entities with parameters: " + what, {"filter": q, "got": got, "want": want})

    got = [(e["PartitionKey"], e["RowKey"]) for e in t.query_entities("RowKey eq 'r05'")]
    check(got == [("other", "r05"), ("q", "r05")], "query across partitions, in key order", got)

    # select
    got = list(t.query_entities("PartitionKey eq @pk and N le @n", parameters={"pk": "q", "n": 10},
                                select=["N", "Name", "Lacking"]))
    check(
        [sorted(e.keys()) for e in got] == [["Lacking", "N", "Name"]] * 2,
        "query_entities with select gives only the selected properties",
        [sorted(e.keys()) for e in got],
    )
    check(
        [(e.get("N"), e.get("Name"), e.get("Lacking", "absent")) for e in got]
        == [(0, "name 0", None), (10, "name 1", None)],
        "query_entities with select: values, and None for a missing property",
        [dict(e) for e in got],
    )
    check(all(e.metadata.get("etag") for e in got), "query_entities with select still gives ETags",
          [e.metadata for e in got])
    got = list(t.list_entities(select="RowKey,When"))
    check(
        len(got) == 11 and all(sorted(e.keys()) == ["RowKey", "When"] for e in got)
        and got[0]["When"] is None and is_utc_datetime(got[1]["When"], base),
        "list_entities with select as a string",
        [dict(e) for e in got[:2]],
    )

    # Errors in filters.
    expect_error("a filter with a syntax error", lambda: rks("N eq eq 1"), HttpResponseError, 400, "InvalidInput")
    expect_error("a filter with an Int32 literal that overflows", lambda: rks("N eq 3000000000"),
                 HttpResponseError, 400, "InvalidInput")

    # $top through results_per_page: the first page is short, the rest follows.
    pager = t.query_entities("PartitionKey eq @pk", parameters={"pk": "q"}, results_per_page=3).by_page()
    sizes, tokens = [], []
    for page in pager:
        sizes.append(len(list(page)))
        tokens.append(pager.continuation_token)
    check(sizes == [3, 3, 3, 1] and all(tokens[:-1]) and tokens[-1] is None,
          "query_entities with results_per_page=3 pages through all ten", {"sizes": sizes, "tokens": tokens})


# ----------------------------------------------------------------- paging


def paging():
    t = new_table("paging")
    n = 1250
    pk = "bulk"
    rows = [{"PartitionKey": pk, "RowKey": "%05d" % i, "I": i} for i in range(n)]
    results = []
    for i in range(0, n, 100):
        results.append(t.submit_transaction([("create", r) for r in rows[i:i + 100]]))
    check(
        len(results) == 13 and all(len(r) == len(rows[i * 100:i * 100 + 100]) for i, r in enumerate(results))
        and all(m.get("etag") for r in results for m in r),
        "13 transactions of up to 100 inserts, each with per-operation ETags",
        [len(r) for r in results],
    )
    t.create_entity({"PartitionKey": "zzz", "RowKey": "last", "I": -1})

    got = [e["RowKey"] for e in t.list_entities() if e["PartitionKey"] == pk]
    check(got == ["%05d" % i for i in range(n)], "list_entities returns all 1250, in order",
          {"count": len(got), "first": got[:3], "last": got[-3:]})
    got = [e["I"] for e in t.query_entities("PartitionKey eq @pk", parameters={"pk": pk})]
    check(got == list(range(n)), "query_entities past 1000 returns all, in order", len(got))

    pager = t.list_entities().by_page()
    sizes, tokens = [], []
    for page in pager:
        sizes.append(len(list(page)))
        tokens.append(pager.continuation_token)
    check(sum(sizes) == n + 1 and all(s <= 1000 for s in sizes) and sizes[0] == 1000
          and all(tokens[:-1]) and tokens[-1] is None,
          "list_entities pages hold at most 1000 and carry continuation tokens", {"sizes": sizes, "tokens": tokens})

    pager = t.query_entities("PartitionKey eq @pk", parameters={"pk": pk}, results_per_page=300).by_page()
    sizes, tokens = [], []
    first = None
    for page in pager:
        items = list(page)
        if first is None:
            first = items
        sizes.append(len(items))
        tokens.append(pager.continuation_token)
    check(sizes == [300, 300, 300, 300, 50], "results_per_page=300 gives pages of 300", sizes)
    check(all(isinstance(tk, dict) and tk.get("PartitionKey") for tk in tokens[:-1]) and tokens[-1] is None,
          "each page but the last has a continuation token", tokens)

    # Resume from a continuation token.
    if tokens and tokens[0]:
        resumed = t.query_entities("PartitionKey eq @pk", parameters={"pk": pk}, results_per_page=300) \
            .by_page(continuation_token=tokens[0])
        page = list(next(iter(resumed)))
        check([e["I"] for e in page] == list(range(300, 600)), "by_page(continuation_token=...) resumes",
              [e["I"] for e in page[:3]])

    pager = t.list_entities(results_per_page=1000, select=["I"]).by_page()
    sizes = [len(list(p)) for p in pager]
    check(sizes == [1000, 251], "results_per_page=1000 with select", sizes)

    # A filter that matches few entities spread over many: pages may be short
    # or even empty (Azure), but all matches come back.
    got = [e["I"] for e in t.query_entities("I ge @lo and I lt @hi", parameters={"lo": 995, "hi": 1005},
                                            results_per_page=4)]
    check(got == list(range(995, 1005)), "a filtered query across pages", got)


# ---------------------------------------------------------------- batches


def batches():
    t = new_table("batch")
    pk = "p'1 \u00fc"
    seeded = {}
    for rk in ("c", "d", "g", "h"):
        t.create_entity({"PartitionKey": pk, "RowKey": rk, "Old": "o", "V": 0})
        seeded[rk] = t.get_entity(pk, rk).metadata["etag"]

    res = t.submit_transaction([
        ("create", {"PartitionKey": pk, "RowKey": "a", "V": 1}),
        ("create", {"PartitionKey": pk, "RowKey": "b", "V": 2, "When": DT_MICRO, "Id": GUID}),
        ("update", {"PartitionKey": pk, "RowKey": "c", "V": 3},
         {"mode": UpdateMode.MERGE, "etag": seeded["c"], "match_condition": MatchConditions.IfNotModified}),
        ("update", {"PartitionKey": pk, "RowKey": "d", "V": 4}, {"mode": UpdateMode.REPLACE}),
        ("upsert", {"PartitionKey": pk, "RowKey": "e", "V": 5}, {"mode": UpdateMode.REPLACE}),
        ("upsert", {"PartitionKey": pk, "RowKey": "f", "V": 6}, {"mode": UpdateMode.MERGE}),
        ("delete", {"PartitionKey": pk, "RowKey": "g"}),
        ("delete", {"PartitionKey": pk, "RowKey": "h"},
         {"etag": seeded["h"], "match_condition": MatchConditions.IfNotModified}),
    ])
    check(isinstance(res, list) and len(res) == 8, "submit_transaction returns one result per operation", res)
    etags = [r.get("etag") for r in res]
    check(all(isinstance(x, str) and x.startswith('W/"') for x in etags[:6]) and etags[6:] == [None, None],
          "an ETag for every operation but the deletes", etags)
    stored = {rk: t.get_entity(pk, rk) for rk in "abcdef"}
    check([stored[rk].metadata["etag"] for rk in "abcdef"] == etags[:6],
          "the returned ETags are the stored ones",
          {"returned": etags[:6], "stored": [stored[rk].metadata["etag"] for rk in "abcdef"]})
    check(stored["a"]["V"] == 1 and stored["b"]["V"] == 2 and is_utc_datetime(stored["b"]["When"], DT_MICRO)
          and stored["b"]["Id"] == GUID, "inserts in a transaction", [dict(stored["a"]), dict(stored["b"])])
    check(stored["c"]["Old"] == "o" and stored["c"]["V"] == 3, "update MERGE with an ETag in a transaction",
          dict(stored["c"]))
    check("Old" not in stored["d"] and stored["d"]["V"] == 4, "update REPLACE in a transaction", dict(stored["d"]))
    check(stored["e"]["V"] == 5 and stored["f"]["V"] == 6, "upserts in a transaction",
          [dict(stored["e"]), dict(stored["f"])])
    check(not exists(t, pk, "g") and not exists(t, pk, "h"), "deletes in a transaction")
    stamps = {stored[rk].metadata["timestamp"] for rk in "abcdef"}
    check(len(stamps) == 1, "one Timestamp for the whole transaction", stamps)

    # A failing operation in the middle: TableTransactionError with its
    # index and code, and nothing of the transaction written.
    err = expect_error(
        "a transaction inserting an existing entity at index 2",
        lambda: t.submit_transaction([
            ("create", {"PartitionKey": pk, "RowKey": "x", "V": 1}),
            ("update", {"PartitionKey": pk, "RowKey": "c", "V": 99}, {"mode": UpdateMode.REPLACE}),
            ("create", {"PartitionKey": pk, "RowKey": "a", "V": 1}),
            ("upsert", {"PartitionKey": pk, "RowKey": "y", "V": 1}),
        ]),
        TableTransactionError, 409, "EntityAlreadyExists", index=2,
    )
    check(err is not None and isinstance(err, ResourceExistsError) is False,
          "the transaction error is a TableTransactionError, not a plain 409 error", type(err).__name__)
    check(not exists(t, pk, "x") and not exists(t, pk, "y"), "the failed transaction inserted nothing")
    check(t.get_entity(pk, "c")["V"] == 3, "the failed transaction updated nothing")

    expect_error(
        "a transaction with a stale ETag at index 1",
        lambda: t.submit_transaction([
            ("create", {"PartitionKey": pk, "RowKey": "x", "V": 1}),
            ("update", {"PartitionKey": pk, "RowKey": "c", "V": 100},
             {"mode": UpdateMode.MERGE, "etag": seeded["c"], "match_condition": MatchConditions.IfNotModified}),
        ]),
        TableTransactionError, 412, "UpdateConditionNotSatisfied", index=1,
    )
    check(not exists(t, pk, "x") and t.get_entity(pk, "c")["V"] == 3, "the stale transaction wrote nothing")

    expect_error(
        "a transaction updating a missing entity at index 1",
        lambda: t.submit_transaction([
            ("create", {"PartitionKey": pk, "RowKey": "x"}),
            ("update", {"PartitionKey": pk, "RowKey": "nope", "V": 1}, {"mode": UpdateMode.MERGE}),
        ]),
        TableTransactionError, 404, "ResourceNotFound", index=1,
    )
    expect_error(
        "a transaction deleting a missing entity",
        lambda: t.submit_transaction([("delete", {"PartitionKey": pk, "RowKey": "nope"})]),
        TableTransactionError, 404, "ResourceNotFound", index=0,
    )
    expect_error(
        "a transaction touching one entity twice",
        lambda: t.submit_transaction([
            ("upsert", {"PartitionKey": pk, "RowKey": "x"}),
            ("upsert", {"PartitionKey": pk, "RowKey": "x"}),
        ]),
        TableTransactionError, 400, "InvalidDuplicateRow",
    )
    expect_error(
        "a transaction of 101 operations",
        lambda: t.submit_transaction([("create", {"PartitionKey": pk, "RowKey": "n%03d" % i}) for i in range(101)]),
        TableTransactionError, 400, "InvalidInput",
    )
    check(not exists(t, pk, "x") and not exists(t, pk, "n000"), "the refused transactions wrote nothing")
    expect_error(
        "a transaction on a missing table",
        lambda: SERVICE.get_table_client(RUN + "nosuch").submit_transaction(
            [("create", {"PartitionKey": pk, "RowKey": "x"})]),
        TableTransactionError, 404, "TableNotFound",
    )

    # Two partitions: the SDK refuses before sending...
    expect_error(
        "submit_transaction spanning two partitions (refused by the SDK)",
        lambda: t.submit_transaction([
            ("create", {"PartitionKey": "one", "RowKey": "x"}),
            ("create", {"PartitionKey": "two", "RowKey": "x"}),
        ]),
        ValueError,
    )
    # ...and the service refuses too when such a batch reaches it. The SDK's
    # own batch builder makes the requests; its client-side check is reset
    # between the two operations.
    from azure.data.tables._table_batch import TableBatchOperations  # pylint: disable=import-outside-toplevel
    ops = TableBatchOperations(t._client, t._client._serialize, t._client._deserialize,  # pylint: disable=protected-access
                               t._client._config, t.table_name)  # pylint: disable=protected-access
    ops.create({"PartitionKey": "one", "RowKey": "x"})
    ops._partition_key = None  # pylint: disable=protected-access
    ops.create({"PartitionKey": "two", "RowKey": "x"})
    expect_error(
        "a batch spanning two partitions (sent anyway)",
        lambda: t._batch_send(t.table_name, *ops.requests),  # pylint: disable=protected-access
        TableTransactionError, 400, "CommandsInBatchActOnDifferentPartitions",
    )
    check(not exists(t, "one", "x") and not exists(t, "two", "x"), "the cross-partition batch wrote nothing")


# -------------------------------------------------------------------- SAS


def sas():
    t = new_table("sas")
    name = t.table_name
    for p in ("t41", "t42", "t43"):
        t.create_entity({"PartitionKey": p, "RowKey": "r", "V": int(p[1:])})
    now = datetime.now(UTC)
    hour = now + timedelta(hours=1)

    # A read-only table SAS.
    read_sas = generate_table_sas(CRED, name, permission=TableSasPermissions(read=True), expiry=hour)
    reader = TableClient(ENDPOINT, name, credential=AzureSasCredential(read_sas), **OPTS)
    check(reader.get_entity("t42", "r")["V"] == 42, "a read-only table SAS reads an entity")
    got = sorted(keys(reader.list_entities()))
    check(got == [("t41", "r"), ("t42", "r"), ("t43", "r")], "a read-only table SAS lists entities", got)
    expect_error("a read-only table SAS inserting", lambda: reader.create_entity({"PartitionKey": "t42", "RowKey": "s"}),
                 HttpResponseError, 403, "AuthorizationPermissionMismatch")
    expect_error("a read-only table SAS upserting",
                 lambda: reader.upsert_entity({"PartitionKey": "t42", "RowKey": "r", "V": 0}),
                 HttpResponseError, 403, "AuthorizationPermissionMismatch")
    expect_error("a read-only table SAS updating",
                 lambda: reader.update_entity({"PartitionKey": "t42", "RowKey": "r", "V": 0}),
                 HttpResponseError, 403, "AuthorizationPermissionMismatch")
    expect_error("a read-only table SAS deleting", lambda: reader.delete_entity("t42", "r"),
                 HttpResponseError, 403, "AuthorizationPermissionMismatch")
    expect_error("a read-only table SAS in a transaction",
                 lambda: reader.submit_transaction([("create", {"PartitionKey": "t42", "RowKey": "s"})]),
                 HttpResponseError, 403, "AuthorizationPermissionMismatch")
    check(not exists(t, "t42", "s") and t.get_entity("t42", "r")["V"] == 42, "the refused writes wrote nothing")
    expect_error("a table SAS creating a table",
                 lambda: TableClient(ENDPOINT, RUN + "sasnew", credential=AzureSasCredential(read_sas),
                                     **OPTS).create_table(),
                 HttpResponseError, 403, "AuthorizationFailure")
    expect_error("a table SAS for another table",
                 lambda: TableClient(ENDPOINT, RUN + "other", credential=AzureSasCredential(read_sas),
                                     **OPTS).get_entity("t42", "r"),
                 HttpResponseError, 403, "AuthorizationFailure")

    # The same SAS as a connection string.
    by_conn = TableClient.from_connection_string(
        "TableEndpoint={};SharedAccessSignature={}".format(ENDPOINT, read_sas), name, **OPTS)
    check(by_conn.get_entity("t41", "r")["V"] == 41, "a SAS connection string reads")
    expect_error("a read-only SAS connection string inserting",
                 lambda: by_conn.create_entity({"PartitionKey": "t41", "RowKey": "s"}),
                 HttpResponseError, 403, "AuthorizationPermissionMismatch")
    # A SAS in the endpoint URL itself.
    in_url = TableClient(ENDPOINT + "?" + read_sas, name, **OPTS)
    check(in_url.get_entity("t43", "r")["V"] == 43, "a SAS in the endpoint URL reads")

    # All permissions, over a partition-key range (start_pk/end_pk).
    ranged_sas = generate_table_sas(CRED, name, permission=TableSasPermissions(read=True, add=True, update=True,
                                                                               delete=True),
                                    expiry=hour, start_pk="t42", end_pk="t42")
    ranged = TableClient(ENDPOINT, name, credential=AzureSasCredential(ranged_sas), **OPTS)
    check(ranged.get_entity("t42", "r")["V"] == 42, "a ranged table SAS reads inside its range")
    expect_error("a ranged table SAS reading outside its range", lambda: ranged.get_entity("t43", "r"),
                 HttpResponseError, 403, "AuthorizationFailure")
    got = keys(ranged.list_entities())
    check(got == [("t42", "r")], "a query with a ranged table SAS stays in its range", got)
    ranged.upsert_entity({"PartitionKey": "t42", "RowKey": "s", "V": 1}, mode=UpdateMode.REPLACE)
    check(exists(t, "t42", "s"), "a ranged table SAS upserts inside its range")
    expect_error("a ranged table SAS inserting outside its range",
                 lambda: ranged.create_entity({"PartitionKey": "t41", "RowKey": "s"}),
                 HttpResponseError, 403, "AuthorizationFailure")
    expect_error("a ranged table SAS transaction outside its range",
                 lambda: ranged.submit_transaction([("create", {"PartitionKey": "t43", "RowKey": "s"})]),
                 HttpResponseError, 403, "AuthorizationFailure")
    check(not exists(t, "t41", "s") and not exists(t, "t43", "s"), "the out-of-range writes wrote nothing")
    ranged.delete_entity("t42", "s")
    check(not exists(t, "t42", "s"), "a ranged table SAS deletes inside its range")

    # Row-key bounds too.
    rk_sas = generate_table_sas(CRED, name, permission=TableSasPermissions(read=True), expiry=hour,
                                start_pk="t41", start_rk="r", end_pk="t42", end_rk="r")
    rk_client = TableClient(ENDPOINT, name, credential=AzureSasCredential(rk_sas), **OPTS)
    got = keys(rk_client.list_entities())
    check(got == [("t41", "r"), ("t42", "r")], "a table SAS with PartitionKey and RowKey bounds", got)

    # A stored access policy referenced by policy_id.
    t.set_table_access_policy({"readers": TableAccessPolicy(permission="r", expiry=hour)})
    pol_sas = generate_table_sas(CRED, name, policy_id="readers")
    pol = TableClient(ENDPOINT, name, credential=AzureSasCredential(pol_sas), **OPTS)
    check(pol.get_entity("t41", "r")["V"] == 41, "a table SAS naming a stored access policy reads")
    expect_error("a table SAS naming a read-only policy inserting",
                 lambda: pol.create_entity({"PartitionKey": "t41", "RowKey": "p"}),
                 HttpResponseError, 403, "AuthorizationPermissionMismatch")
    t.set_table_access_policy({})
    expect_error("a table SAS naming a deleted policy", lambda: pol.get_entity("t41", "r"),
                 ClientAuthenticationError, 403, "AuthenticationFailed")

    # Account SASes.
    obj_sas = generate_account_sas(CRED, ResourceTypes(object=True), AccountSasPermissions(read=True), hour)
    obj = TableClient(ENDPOINT, name, credential=AzureSasCredential(obj_sas), **OPTS)
    check(obj.get_entity("t43", "r")["V"] == 43, "an object account SAS reads")
    check(len(list(obj.list_entities())) == 3, "an object account SAS queries")
    expect_error("a read-only account SAS inserting",
                 lambda: obj.create_entity({"PartitionKey": "t43", "RowKey": "s"}),
                 HttpResponseError, 403, "AuthorizationPermissionMismatch")
    check(not exists(t, "t43", "s"), "the refused account-SAS insert wrote nothing")
    obj_service = TableServiceClient(ENDPOINT, credential=AzureSasCredential(obj_sas), **OPTS)
    expect_error("an object account SAS listing tables", lambda: list(obj_service.list_tables()),
                 HttpResponseError, 403, "AuthorizationResourceTypeMismatch")
    obj_conn = TableClient.from_connection_string(
        "TableEndpoint={};SharedAccessSignature={}".format(ENDPOINT, obj_sas), name, **OPTS)
    check(obj_conn.get_entity("t41", "r")["V"] == 41, "an account SAS connection string reads")

    all_sas = generate_account_sas(CRED, ResourceTypes.from_string("sco"),
                                   AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True,
                                                         create=True, update=True), hour)
    full = TableServiceClient.from_connection_string(
        "TableEndpoint={};SharedAccessSignature={}".format(ENDPOINT, all_sas), **OPTS)
    extra = table_name("sasacct")
    full.create_table(extra)
    names = [x.name for x in full.list_tables()]
    check(extra in names and name in names, "a full account SAS creates and lists tables", names)
    fc = full.get_table_client(extra)
    fc.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
    fc.upsert_entity({"PartitionKey": "p", "RowKey": "r", "W": 2})
    fc.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "s"})])
    check(fc.get_entity("p", "r")["W"] == 2 and exists(fc, "p", "s"), "a full account SAS writes entities")
    props = full.get_service_properties()
    check("cors" in props, "a full account SAS reads service properties")
    full.delete_table(extra)
    check(extra not in [x.name for x in SERVICE.list_tables()], "a full account SAS deletes a table")

    svc_sas = generate_account_sas(CRED, ResourceTypes(service=True), AccountSasPermissions(read=True), hour)
    svc = TableServiceClient(ENDPOINT, credential=AzureSasCredential(svc_sas), **OPTS)
    check("hour_metrics" in svc.get_service_properties(), "a service account SAS reads service properties")

    # Expired SASes: 403 AuthenticationFailed, and the SDK must be able to
    # decode the error body on every kind of call.
    past = now - timedelta(minutes=10)
    expired_clients = [
        ("expired table SAS", TableClient(ENDPOINT, name, credential=AzureSasCredential(
            generate_table_sas(CRED, name, permission=TableSasPermissions(read=True, add=True), expiry=past)),
            **OPTS)),
        ("expired account SAS", TableClient(ENDPOINT, name, credential=AzureSasCredential(
            generate_account_sas(CRED, ResourceTypes(object=True), AccountSasPermissions(read=True, add=True),
                                 past)), **OPTS)),
    ]
    for what, c in expired_clients:
        expect_error(what + ": get_entity", lambda c=c: c.get_entity("t41", "r"),
                     ClientAuthenticationError, 403, "AuthenticationFailed")
        expect_error(what + ": list_entities", lambda c=c: list(c.list_entities()),
                     ClientAuthenticationError, 403, "AuthenticationFailed")
        expect_error(what + ": query_entities", lambda c=c: list(c.query_entities("V eq @v", parameters={"v": 1})),
                     ClientAuthenticationError, 403, "AuthenticationFailed")
        # create_entity in 12.4.x decodes the error but re-raises the raw
        # HttpResponseError; decoding must still not blow up.
        expect_error(what + ": create_entity", lambda c=c: c.create_entity({"PartitionKey": "t41", "RowKey": "x"}),
                     HttpResponseError, 403, "AuthenticationFailed")
        expect_error(what + ": submit_transaction",
                     lambda c=c: c.submit_transaction([("create", {"PartitionKey": "t41", "RowKey": "x"})]),
                     HttpResponseError, 403, "AuthenticationFailed")
    check(not exists(t, "t41", "x"), "the expired SASes wrote nothing")

    # A tampered SAS: permissions raised after signing.
    tampered = read_sas.replace("sp=r", "sp=raud")
    forged = TableClient(ENDPOINT, name, credential=AzureSasCredential(tampered), **OPTS)
    expect_error("a SAS with altered permissions", lambda: forged.delete_entity("t41", "r"),
                 ClientAuthenticationError, 403, "AuthenticationFailed")
    check(exists(t, "t41", "r"), "the tampered SAS deleted nothing")

    # A wrong account key.
    bad = TableClient(ENDPOINT, name, credential=AzureNamedKeyCredential(
        ACCOUNT, base64.b64encode(b"not the key" * 4).decode()), **OPTS)
    expect_error("a wrong account key", lambda: bad.get_entity("t41", "r"),
                 ClientAuthenticationError, 403, "AuthenticationFailed")


# --------------------------------------------------------- access policies


def access_policies():
    t = new_table("acl")
    check(t.get_table_access_policy() == {}, "a new table has no access policies", t.get_table_access_policy())

    start = datetime(2024, 1, 1, 0, 0, 0, tzinfo=UTC)
    expiry = datetime(2031, 6, 30, 23, 59, 59, tzinfo=UTC)
    t.set_table_access_policy({
        "full": TableAccessPolicy(start=start, expiry=expiry, permission="raud"),
        "readonly": TableAccessPolicy(expiry=expiry, permission=TableSasPermissions(read=True)),
        "partial": TableAccessPolicy(permission="r"),
        "none": None,
        "empty": TableAccessPolicy(),
    })
    got = t.get_table_access_policy()
    check(sorted(got) == ["empty", "full", "none", "partial", "readonly"], "get_table_access_policy lists every id",
          sorted(got))
    f = got.get("full")
    check(
        f is not None and f.start == start and f.expiry == expiry and f.permission == "raud",
        "a policy with start, expiry and permission reads back equal",
        f and (f.start, f.expiry, f.permission),
    )
    r = got.get("readonly")
    check(r is not None and r.start is None and r.expiry == expiry and r.permission == "r",
          "a policy with expiry and permission reads back equal", r and (r.start, r.expiry, r.permission))
    p = got.get("partial")
    check(p is not None and p.start is None and p.expiry is None and p.permission == "r",
          "a policy with only a permission reads back equal", p and (p.start, p.expiry, p.permission))
    n = got.get("none", "absent")
    check(n is None, "an id set with None reads back as None",
          n if n in (None, "absent") else (n.start, n.expiry, n.permission))
    e = got.get("empty", "absent")
    check(e is None, "an id set with an empty TableAccessPolicy() reads back as None (no AccessPolicy element)",
          e if e in (None, "absent") else (e.start, e.expiry, e.permission))

    # Replacing the set replaces it whole.
    t.set_table_access_policy({"only": TableAccessPolicy(permission="a", start=start)})
    got = t.get_table_access_policy()
    check(list(got) == ["only"] and got["only"].permission == "a" and got["only"].start == start
          and got["only"].expiry is None, "set_table_access_policy replaces the whole set",
          {k: v and (v.start, v.expiry, v.permission) for k, v in got.items()})

    t.set_table_access_policy({})
    check(t.get_table_access_policy() == {}, "set_table_access_policy({}) clears the policies",
          t.get_table_access_policy())

    five = {"id%d" % i: TableAccessPolicy(permission="r", expiry=expiry) for i in range(5)}
    t.set_table_access_policy(five)
    check(sorted(t.get_table_access_policy()) == sorted(five), "five policies are accepted")
    six = dict(five, id5=TableAccessPolicy(permission="r", expiry=expiry))
    # Azure answers 400 InvalidXmlDocument; the SDK turns it into ValueError.
    expect_error("six policies", lambda: t.set_table_access_policy(six), ValueError)
    check(sorted(t.get_table_access_policy()) == sorted(five), "the refused sixth policy changed nothing")

    long_id = "x" * 64
    t.set_table_access_policy({long_id: TableAccessPolicy(permission="rd")})
    check(list(t.get_table_access_policy()) == [long_id], "a 64-character policy id")


# ------------------------------------------------------ service properties


def service_properties():
    svc = TableServiceClient.from_connection_string(CONN_STR, **OPTS)
    before = svc.get_service_properties()
    check(
        set(before) == {"analytics_logging", "hour_metrics", "minute_metrics", "cors"}
        and isinstance(before["analytics_logging"], TableAnalyticsLogging)
        and isinstance(before["hour_metrics"], TableMetrics),
        "get_service_properties", before,
    )

    logging = TableAnalyticsLogging(read=True, write=True, delete=False,
                                    retention_policy=TableRetentionPolicy(enabled=True, days=5))
    hour = TableMetrics(enabled=True, include_apis=True, retention_policy=TableRetentionPolicy(enabled=True, days=7))
    minute = TableMetrics(enabled=False)
    cors = [
        TableCorsRule(["https://app.example.com", "https://other.example.com"], ["GET", "PUT", "MERGE"],
                      allowed_headers=["x-ms-meta-*", "content-type"], exposed_headers=["x-ms-request-id"],
                      max_age_in_seconds=500),
        TableCorsRule(["*"], ["DELETE", "OPTIONS"], max_age_in_seconds=0),
    ]
    svc.set_service_properties(analytics_logging=logging, hour_metrics=hour, minute_metrics=minute, cors=cors)
    got = svc.get_service_properties()
    lg = got["analytics_logging"]
    check(
        (lg.version, lg.read, lg.write, lg.delete, lg.retention_policy.enabled, lg.retention_policy.days)
        == ("1.0", True, True, False, True, 5),
        "analytics logging round trip", lg.__dict__ if lg else lg,
    )
    hm = got["hour_metrics"]
    check(
        (hm.version, hm.enabled, hm.include_apis, hm.retention_policy.enabled, hm.retention_policy.days)
        == ("1.0", True, True, True, 7),
        "hour metrics round trip", hm.__dict__ if hm else hm,
    )
    mm = got["minute_metrics"]
    check(
        (mm.enabled, mm.retention_policy.enabled) == (False, False) and not mm.include_apis,
        "minute metrics round trip", mm.__dict__ if mm else mm,
    )
    rules = [(c.allowed_origins, c.allowed_methods, c.allowed_headers, c.exposed_headers, c.max_age_in_seconds)
             for c in got["cors"]]
    want = [
        (["https://app.example.com", "https://other.example.com"], ["GET", "PUT", "MERGE"],
         ["x-ms-meta-*", "content-type"], ["x-ms-request-id"], 500),
        (["*"], ["DELETE", "OPTIONS"], [], [], 0),
    ]
    check(rules == want, "CORS rules round trip", rules)

    # Elements left out of a set keep their values.
    svc.set_service_properties(minute_metrics=TableMetrics(enabled=True, include_apis=False,
                                                           retention_policy=TableRetentionPolicy(enabled=True,
                                                                                                 days=1)))
    got = svc.get_service_properties()
    mm = got["minute_metrics"]
    check((mm.enabled, mm.include_apis, mm.retention_policy.days) == (True, False, 1),
          "set_service_properties of minute metrics alone", mm.__dict__)
    check(got["hour_metrics"].retention_policy.days == 7 and len(got["cors"]) == 2
          and got["analytics_logging"].read is True,
          "the properties left out keep their values",
          {"hour": got["hour_metrics"].__dict__, "cors": len(got["cors"])})

    expect_error(
        "six CORS rules",
        lambda: svc.set_service_properties(cors=[TableCorsRule(["*"], ["GET"])] * 6),
        HttpResponseError, 400,
    )
    expect_error(
        "a retention policy of 366 days",
        lambda: svc.set_service_properties(hour_metrics=TableMetrics(
            enabled=True, include_apis=False, retention_policy=TableRetentionPolicy(enabled=True, days=366))),
        HttpResponseError, 400,
    )

    # Restore what was there (the SDK sends no Cors element for an empty list,
    # so CORS rules are cleared by a rule-less set only when the service
    # treats an empty <Cors/> as "none"; restore the rest).
    svc.set_service_properties(analytics_logging=before["analytics_logging"], hour_metrics=before["hour_metrics"],
                               minute_metrics=before["minute_metrics"])

    # Statistics: the SDK sends them to the secondary location. With a
    # path-style endpoint (http://host:port/<account>) it swaps the URL's
    # netloc for "host:port/<account>-secondary" and keeps the path, so the
    # request is GET /<account>-secondary/<account>/?restype=service&comp=stats
    # (host-style Azure URLs become <account>-secondary.table.core.windows.net).
    for what, client in [("connection string", svc), ("endpoint and AzureNamedKeyCredential", SERVICE)]:
        try:
            stats = client.get_service_stats()
        except Exception as err:  # pylint: disable=broad-except
            check(False, "get_service_stats ({}) on the SDK's secondary URL".format(what), describe(err))
            continue
        geo = stats.get("geo_replication", {})
        check(geo.get("status") == "live" and isinstance(geo.get("last_sync_time"), datetime),
              "get_service_stats ({}) on the SDK's secondary URL".format(what), stats)
    # With secondary_hostname set, the same call goes to
    # GET /<account>/?restype=service&comp=stats on the primary host.
    prim = TableServiceClient(ENDPOINT, credential=CRED, secondary_hostname=ENDPOINT.split("//", 1)[1].split("/")[0],
                              **OPTS)
    stats = prim.get_service_stats()
    geo = stats.get("geo_replication", {})
    check(geo.get("status") == "live" and isinstance(geo.get("last_sync_time"), datetime),
          "get_service_stats with secondary_hostname set to the primary host", stats)


# ------------------------------------------------------------------- main


def cleanup():
    for name in created_tables:
        try:
            SERVICE.delete_table(name)
        except Exception as err:  # pylint: disable=broad-except
            check(False, "delete table " + name, describe(err))
    left = [t.name for t in SERVICE.query_tables("TableName ge @lo and TableName lt @hi",
                                                  parameters={"lo": RUN, "hi": RUN + "~"})]
    check(left == [], "every table of this run is deleted", left)


def main():
    print("azure-data-tables", __import__("azure.data.tables", fromlist=["VERSION"]).VERSION,
          "on Python", sys.version.split()[0], "against", ENDPOINT, "run", RUN)
    start = time.time()
    for name, fn in [
        ("tables", tables),
        ("entities", entities),
        ("edm", edm_types),
        ("keys", awkward_keys),
        ("queries", queries),
        ("paging", paging),
        ("batches", batches),
        ("sas", sas),
        ("acl", access_policies),
        ("service", service_properties),
        ("cleanup", cleanup),
    ]:
        run(name, fn)
    print("{:.1f}s".format(time.time() - start))
    if failures:
        print("\n{} checks failed:".format(len(failures)))
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
