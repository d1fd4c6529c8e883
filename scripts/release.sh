#!/usr/bin/env bash
# make release: static binaries of the release that CHANGELOG.md dates, for
# each platform given (GOOS/GOARCH), and their SHA-256 sums, in $DIST.
set -euo pipefail
dist=${DIST:-dist}
go=${GO:-go}
[ $# -gt 0 ] || { echo "usage: $0 GOOS/GOARCH ..." >&2; exit 2; }

release=$(sed -n 's/^const Release = "\(.*\)"$/\1/p' internal/version/version.go)
heading=$(grep -m1 '^## \[' CHANGELOG.md || true)
case "$heading" in
"## [$release] - "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]) ;;
*)
	echo "release: internal/version.Release is $release, but CHANGELOG.md's newest heading is \"$heading\":" >&2
	echo "date the release there (## [$release] - YYYY-MM-DD) before building it" >&2
	exit 1 ;;
esac

mkdir -p "$dist"
names=()
for platform in "$@"; do
	goos=${platform%/*} goarch=${platform#*/}
	name=auditrail-$release-$goos-$goarch
	echo "release: $name"
	CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch "$go" build -trimpath -buildvcs=true \
		-ldflags "-s -w -X github.com/auditrail/auditrail/internal/version.tagged=true" \
		-o "$dist/$name" ./cmd/auditrail
	names+=("$name")
done
(cd "$dist" && sha256sum "${names[@]}" > SHA256SUMS)
echo "release: $dist/SHA256SUMS"
cat "$dist/SHA256SUMS"
