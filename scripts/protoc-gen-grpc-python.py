#!/usr/bin/env python3
"""A protoc/buf plugin that writes Python messages (_pb2.py) and gRPC stubs (_pb2_grpc.py).

It runs the protoc bundled with grpcio-tools (pip) or python3-grpc-tools (Debian) on the
descriptors buf has already compiled, so it works offline and with any grpcio-tools: Debian
bookworm's bundles protoc 3.5, which cannot parse proto3 `optional` itself but handles the
compiled descriptors (the optional fields keep their presence through their synthetic oneofs).
"""
import os
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc


def main() -> int:
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse()
    response.supported_features = plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    with tempfile.TemporaryDirectory() as tmp:
        descriptors = os.path.join(tmp, "descriptors.binpb")
        with open(descriptors, "wb") as f:
            f.write(descriptor_pb2.FileDescriptorSet(file=request.proto_file).SerializeToString())
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        # stdout is the plugin's answer to buf: protoc's own messages must go to stderr.
        saved = os.dup(1)
        os.dup2(2, 1)
        try:
            code = protoc.main(["protoc", "--descriptor_set_in=" + descriptors, "--python_out=" + out,
                                "--grpc_python_out=" + out, *request.file_to_generate])
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        if code != 0:
            response.error = "grpc_tools protoc failed with exit code %d (see its messages above)" % code
        else:
            for root, _, names in os.walk(out):
                for name in sorted(names):
                    path = os.path.join(root, name)
                    with open(path, encoding="utf-8") as f:
                        response.file.add(name=os.path.relpath(path, out), content=f.read())
    sys.stdout.buffer.write(response.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
