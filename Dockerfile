# The trainyard image: the static binary and nothing else. The operator Deployment runs it
# (`trainyard operator`, see config/manager/deployment.yaml), and the init container of
# every worker pod runs `/trainyard copy-self <dir>` to copy it into the pod, whatever the
# worker's own image is.
#
#   make build     # CGO_ENABLED=0: a static binary that needs no libc
#   docker build -t ghcr.io/trainyard/trainyard:$(git describe --tags --always) .
FROM scratch
LABEL org.opencontainers.image.source="https://github.com/trainyard/trainyard" \
      org.opencontainers.image.description="Trainyard: distributed PyTorch training; the Kubernetes operator and the in-pod launcher"
COPY bin/trainyard /trainyard
USER 65532:65532
ENTRYPOINT ["/trainyard"]
