"""A tiny OTLP/HTTP trace receiver for tests: decodes each ExportTraceServiceRequest with the
official `opentelemetry-proto` messages (PyPI) and appends one JSON line per span to a file.

    python otlp-receiver.py --out spans.jsonl --port-file port.txt

It listens on 127.0.0.1 (an ephemeral port, written to --port-file once it listens), answers
POST /v1/traces with an empty ExportTraceServiceResponse, and anything else with 404.
"""
import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def spans(req):
    for rs in req.resource_spans:
        resource = attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield {
                    "service": resource.get("service.name"),
                    "scope": ss.scope.name,
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": KINDS.get(s.kind, str(s.kind)),
                    "start_ns": s.start_time_unix_nano,
                    "end_ns": s.end_time_unix_nano,
                    "attributes": attrs(s.attributes),
                    "events": [{"name": e.name, "attributes": attrs(e.attributes)} for e in s.events],
                    "links": [
                        {"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in s.links
                    ],
                    "status": {"code": s.status.code, "message": s.status.message},
                }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            req = ExportTraceServiceRequest()
            try:
                req.ParseFromString(body)
            except Exception as e:  # a test reads this on stderr
                print(f"otlp-receiver: undecodable body: {e}", file=sys.stderr)
                self.send_response(400)
                self.end_headers()
                return
            with lock, open(args.out, "a") as f:
                for s in spans(req):
                    f.write(json.dumps(s) + "\n")
            out = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
