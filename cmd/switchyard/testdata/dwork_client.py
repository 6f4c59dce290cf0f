# A dwork client as dwork's own are: pyzmq's REQ socket and the Python
# protobuf module protoc generates from the .proto (Debian's python3-zmq,
# python3-protobuf, protobuf-compiler). It reads one request a line from
# stdin, as the JSON form of a QueryMsg ({"type": "Steal", "location": "h1"})
# or {"raw": "<hex>"} for bytes sent as they are, and prints each reply as
# the JSON form of the QueryMsg it decodes to, one line each.
#
# usage: dwork_client.py ENDPOINT DIR_WITH_dwork_pb2
import json
import sys

import zmq
from google.protobuf import json_format

sys.path.insert(0, sys.argv[2])
import dwork_pb2  # noqa: E402

sock = zmq.Context().socket(zmq.REQ)
sock.setsockopt(zmq.LINGER, 0)
sock.setsockopt(zmq.RCVTIMEO, 20000)
sock.connect(sys.argv[1])
for line in sys.stdin:
    req = json.loads(line)
    if "raw" in req:
        body = bytes.fromhex(req["raw"])
    else:
        body = json_format.ParseDict(req, dwork_pb2.QueryMsg()).SerializePartialToString()
    sock.send(body)
    rep = dwork_pb2.QueryMsg()
    rep.ParseFromString(sock.recv())
    print(json_format.MessageToJson(rep, preserving_proto_field_name=True, indent=None), flush=True)
