# Build: docker build -t auditrail .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/auditrail ./cmd/auditrail

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/auditrail /usr/local/bin/auditrail
ENTRYPOINT ["/usr/local/bin/auditrail"]
