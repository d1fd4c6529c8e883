# Build: docker build -t auditrail .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY third_party ./third_party
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/auditrail ./cmd/auditrail && mkdir /out/empty

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/auditrail /usr/local/bin/auditrail
# The directories the image's processes write, owned by the user below:
# the volumes of docker-compose.yml are mounted on them (a new named volume
# takes the owner of the image's directory), and /data is the working
# directory (./data of `auditrail dev`, ./outbox of a tool runner).
COPY --from=build --chown=65532:65532 /out/empty /nats-auth
COPY --from=build --chown=65532:65532 /out/empty /nats-keys
COPY --from=build --chown=65532:65532 /out/empty /nats-stream
COPY --from=build --chown=65532:65532 /out/empty /nats-tls
COPY --from=build --chown=65532:65532 /out/empty /outbox
COPY --from=build --chown=65532:65532 /out/empty /data
WORKDIR /data
# Not root: uid and gid 65532 (distroless's "nonroot"), numeric so that a
# runtime that refuses root (Kubernetes' runAsNonRoot) can check it.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/auditrail"]
