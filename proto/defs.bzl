"""Compiles .proto files with the system protoc and grpc_cpp_plugin."""

def cc_proto_grpc_library(name, src, deps = [], grpc = True, visibility = None):
    """A cc_library from one .proto, with gRPC stubs when `grpc` is set.

    Args:
      name: target name.
      src: the .proto file, a path relative to the workspace root's package.
      deps: other targets made by this macro that `src` imports.
      grpc: also generate *.grpc.pb.{h,cc}.
      visibility: passed through.
    """
    stem = src[:-len(".proto")]
    outs = [stem + ".pb.h", stem + ".pb.cc"]
    if grpc:
        outs += [stem + ".grpc.pb.h", stem + ".grpc.pb.cc"]
    pkg = native.package_name()
    grpc_flags = " --grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)" if grpc else ""
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = "protoc -I. --cpp_out=$(GENDIR)" + grpc_flags + " " + pkg + "/" + src,
    )
    native.filegroup(name = name + "_srcs", srcs = [src], visibility = visibility)
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party/system:grpc" if grpc else "//third_party/system:protobuf"],
        visibility = visibility,
    )
