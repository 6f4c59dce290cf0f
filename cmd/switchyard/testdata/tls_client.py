#!/usr/bin/python3
"""A Gearman client over TLS with Python's ssl module: it submits one
background job and prints the server's answer, JOB_CREATED and the handle.

    tls_client.py HOST PORT SERVER_NAME CA_FILE CERT KEY FUNCTION PAYLOAD

CERT and KEY "-": no client certificate. The server's certificate is
checked against CA_FILE and SERVER_NAME. Exit status 1 on any failure
(the handshake, the server closing, an answer that is not JOB_CREATED)."""

import socket
import ssl
import struct
import sys


def main():
    host, port, name, ca, cert, key, func, payload = sys.argv[1:9]
    ctx = ssl.create_default_context(cafile=ca)
    if cert != "-":
        ctx.load_cert_chain(cert, key)
    raw = socket.create_connection((host, int(port)), timeout=10)
    sock = ctx.wrap_socket(raw, server_hostname=name)
    body = b"\0".join([func.encode(), b"", payload.encode()])
    sock.sendall(b"\0REQ" + struct.pack(">II", 18, len(body)) + body)  # SUBMIT_JOB_BG
    head = b""
    while len(head) < 12:
        chunk = sock.recv(12 - len(head))
        if not chunk:
            sys.exit("the server closed the connection")
        head += chunk
    magic, typ, size = head[:4], *struct.unpack(">II", head[4:])
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            sys.exit("the server closed the connection")
        data += chunk
    if magic != b"\0RES" or typ != 8:  # JOB_CREATED
        sys.exit("answered type %d %r" % (typ, data))
    print("JOB_CREATED " + data.decode())


if __name__ == "__main__":
    try:
        main()
    except (OSError, ssl.SSLError) as e:
        sys.exit(str(e))
