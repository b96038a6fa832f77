#!/usr/bin/env python3
"""Writes nmo's container image as an OCI image layout, without a container engine.

One layer holds the operator binary at /usr/local/bin/nmo (and /manager, the path the Go
operator's manifests run), the shared libraries it loads (found with ldd, copied from this
machine's Debian packages), the CA certificates, a passwd/group naming the non-root user 65532,
and an empty /tmp. Everything that could vary between two builds of the same inputs is fixed:
entries sorted, owners 0:0, modes normalised, every time stamp SOURCE_DATE_EPOCH, gzip without
a name or time, JSON with sorted keys. The same binary and libraries give the same digest.

Usage: oci_layout.py --binary FILE --out DIR --name REGISTRY/REPO:TAG --created EPOCH
                     [--revision COMMIT] [--source URL]
Prints the manifest digest (sha256:...) on its last line.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

USER = 65532
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def libraries(binary):
    """The paths ldd resolves for the binary's shared libraries, the loader included."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts:
            target = parts[parts.index("=>") + 1]
            if target.startswith("/"):
                paths.append(target)
        elif parts and parts[0].startswith("/"):
            paths.append(parts[0])
    if not paths:
        sys.exit(f"ldd found no libraries for {binary} (a static binary needs none: drop this check)")
    return paths


class Tree:
    """The image's files: path -> (kind, payload, mode); kind is dir, file or link."""

    def __init__(self):
        self.entries = {}

    def directory(self, path, mode=0o755):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub and sub not in self.entries:
                self.entries[sub] = ("dir", None, 0o755)
        if path.strip("/"):
            self.entries[path.strip("/")] = ("dir", None, mode)

    def file(self, path, data, mode=0o644):
        path = path.strip("/")
        if os.path.dirname(path):
            self.directory(os.path.dirname(path))
        self.entries[path] = ("file", data, mode)

    def link(self, path, target):
        path = path.strip("/")
        if os.path.dirname(path):
            self.directory(os.path.dirname(path))
        self.entries[path] = ("link", target, 0o777)

    def host_path(self, path):
        """Copies a host file into the same place, with every symlink on the way (merged-usr
        /lib -> usr/lib, the loader's /lib64 link) made again."""
        current = ""
        for part in path.strip("/").split("/"):
            current = f"{current}/{part}"
            if os.path.islink(current):
                target = os.readlink(current)
                self.link(current, target)
                resolved = os.path.normpath(os.path.join(os.path.dirname(current), target))
                return self.host_path(resolved + path[len(current):])
        with open(path, "rb") as f:
            data = f.read()
        mode = 0o755 if os.access(path, os.X_OK) else 0o644
        self.file(path, data, mode)

    def tar(self, mtime):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for path in sorted(self.entries):
                kind, payload, mode = self.entries[path]
                info = tarfile.TarInfo(path)
                info.mtime = mtime
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode = mode
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif kind == "link":
                    info.type = tarfile.SYMTYPE
                    info.linkname = payload
                    tar.addfile(info)
                else:
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
        return buffer.getvalue()


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def blob(out, data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(out, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return f"sha256:{digest}", len(data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True, help="REGISTRY/REPO:TAG")
    parser.add_argument("--created", required=True, type=int, help="SOURCE_DATE_EPOCH")
    parser.add_argument("--revision", default="unknown")
    parser.add_argument("--source", default="")
    args = parser.parse_args()
    repository, _, tag = args.name.rpartition(":")
    if not repository or "/" in tag or "." not in repository.split("/")[0]:
        sys.exit(f"--name must be a fully qualified REGISTRY/REPO:TAG, not {args.name}")
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(args.created))

    tree = Tree()
    with open(args.binary, "rb") as f:
        tree.file("usr/local/bin/nmo", f.read(), 0o755)
    tree.link("manager", "/usr/local/bin/nmo")
    for library in libraries(args.binary):
        tree.host_path(library)
    tree.host_path(CA_BUNDLE)
    tree.file("etc/passwd", f"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{USER}:{USER}:nonroot:/home/nonroot:/sbin/nologin\n".encode())
    tree.file("etc/group", f"root:x:0:\nnonroot:x:{USER}:\n".encode())
    tree.file("etc/nsswitch.conf", b"hosts: files dns\n")
    tree.directory("home/nonroot", 0o755)
    tree.directory("tmp", 0o1777)

    layer = tree.tar(args.created)
    compressed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, compresslevel=6, mtime=0) as gz:
        gz.write(layer)

    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(os.path.join(args.out, "blobs", "sha256"))
    layer_digest, layer_size = blob(args.out, compressed.getvalue())
    version = tag
    labels = {
        "org.opencontainers.image.title": "nmo",
        "org.opencontainers.image.description": "Kubernetes node maintenance operator (drop-in for the medik8s Node Maintenance Operator)",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.revision": args.revision,
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.created": created,
    }
    if args.source:
        labels["org.opencontainers.image.source"] = args.source
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": f"{USER}:{USER}",
            "Entrypoint": ["/usr/local/bin/nmo"],
            "Cmd": ["run"],
            "Env": [
                "PATH=/usr/local/bin:/usr/bin:/bin",
                f"SSL_CERT_FILE={CA_BUNDLE}",
            ],
            "WorkingDir": "/",
            "ExposedPorts": {"8443/tcp": {}, "8081/tcp": {}, "9443/tcp": {}},
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
        "history": [{"created": created, "created_by": "deploy/image/oci_layout.py"}],
    }
    config_digest, config_size = blob(args.out, canonical(config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": layer_size}],
        "annotations": labels,
    }
    manifest_digest, manifest_size = blob(args.out, canonical(manifest))
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": OCI_MANIFEST,
            "digest": manifest_digest,
            "size": manifest_size,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {
                "org.opencontainers.image.ref.name": tag,
                "io.containerd.image.name": args.name,
            },
        }],
    }
    with open(os.path.join(args.out, "index.json"), "wb") as f:
        f.write(canonical(index))
    with open(os.path.join(args.out, "oci-layout"), "wb") as f:
        f.write(canonical({"imageLayoutVersion": "1.0.0"}))
    print(manifest_digest)


if __name__ == "__main__":
    main()
