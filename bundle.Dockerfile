# The OLM bundle image: nmo's manifests and metadata, nothing to run. Build from the repository
# root, after regenerating bundle/ (docs/development.md, "Generated files"):
#   docker build -f bundle.Dockerfile -t ghcr.io/nmo-project/nmo-bundle:v0.1.0 .
FROM scratch

# The same values as bundle/metadata/annotations.yaml (a test checks they agree).
LABEL operators.operatorframework.io.bundle.mediatype.v1=registry+v1 \
      operators.operatorframework.io.bundle.manifests.v1=manifests/ \
      operators.operatorframework.io.bundle.metadata.v1=metadata/ \
      operators.operatorframework.io.bundle.package.v1=nmo \
      operators.operatorframework.io.bundle.channels.v1=stable \
      operators.operatorframework.io.bundle.channel.default.v1=stable

COPY bundle/manifests /manifests/
COPY bundle/metadata /metadata/
