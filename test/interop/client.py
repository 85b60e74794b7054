"""A Python gRPC client of Switchboard, on code generated from proto/ (buf.gen.clients.yaml).

Run by python-client.test.ts: python3 client.py GEN_DIR HOST:PORT ACCOUNT_SID TOKEN PROPERTY_SID FROM
It prints one JSON object with what each call answered; the test asserts on it.
"""
import base64
import json
import sys

gen_dir, target, account_sid, token, property_sid, sender = sys.argv[1:7]
sys.path.insert(0, gen_dir)

import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from google.rpc import error_details_pb2, status_pb2  # noqa: E402
from switchboard.v2 import addresses_pb2, addresses_pb2_grpc, messaging_pb2, messaging_pb2_grpc  # noqa: E402

TIMEOUT = 20
auth = [("authorization", "Basic " + base64.b64encode(f"{account_sid}:{token}".encode()).decode())]


def as_json(message):
    return json_format.MessageToDict(message)


def rpc_error(call):
    """Makes a call that must fail; returns its status and the details from grpc-status-details-bin."""
    try:
        call()
    except grpc.RpcError as e:
        trailers = dict(e.trailing_metadata() or ())
        status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
        info = error_details_pb2.ErrorInfo()
        bad = error_details_pb2.BadRequest()
        out = {"code": e.code().name, "message": e.details(), "statusCode": status.code, "statusMessage": status.message,
               "detailTypes": [d.type_url for d in status.details], "fields": []}
        for detail in status.details:
            if detail.Is(info.DESCRIPTOR):
                detail.Unpack(info)
                out["reason"] = info.reason
                out["domain"] = info.domain
            elif detail.Is(bad.DESCRIPTOR):
                detail.Unpack(bad)
                out["fields"] = [{"field": v.field, "reason": v.reason} for v in bad.field_violations]
        return out
    raise AssertionError("the call succeeded but an error was expected")


with grpc.insecure_channel(target) as channel:
    messages = messaging_pb2_grpc.MessagingServiceStub(channel)
    addresses = addresses_pb2_grpc.AddressServiceStub(channel)
    result = {}

    # "from" is a Python keyword: protobuf takes it by keyword dictionary.
    send = messaging_pb2.SendMessageRequest(**{"property_sid": property_sid, "from": sender, "to": "+447700900123",
                                                "text": "Hello from Python"})
    sent = messages.SendMessage(send, metadata=auth, timeout=TIMEOUT)
    result["sent"] = as_json(sent)
    record = messages.GetMessage(messaging_pb2.GetMessageRequest(message_sid=sent.message_sid), metadata=auth, timeout=TIMEOUT)
    result["record"] = {"MessageSid": record.message_sid, "Status": record.status, "Text": record.text}

    bad = messaging_pb2.SendMessageRequest(property_sid=property_sid, to="123", text="hi")
    result["invalid"] = rpc_error(lambda: messages.SendMessage(bad, metadata=auth, timeout=TIMEOUT))
    result["unauthenticated"] = rpc_error(lambda: messages.SendMessage(send, timeout=TIMEOUT))

    created = addresses.CreateAddress(addresses_pb2.CreateAddressRequest(
        account_sid=account_sid, friendly="Head office", line1="10 Downing Street", city="London",
        country_code="gb", postal_code="SW1A 2AA"), metadata=auth, timeout=TIMEOUT)
    result["addressCreated"] = as_json(created)
    deleted = addresses.DeleteAddress(addresses_pb2.DeleteAddressRequest(address_sid=created.address_sid),
                                      metadata=auth, timeout=TIMEOUT)
    result["addressDeleted"] = as_json(deleted)
    result["addressAfterDelete"] = rpc_error(lambda: addresses.GetAddress(
        addresses_pb2.GetAddressRequest(address_sid=created.address_sid), metadata=auth, timeout=TIMEOUT))

print(json.dumps(result))
