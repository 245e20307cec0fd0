#!/usr/bin/env bash
# Builds the Debian package of longhaul: target/debian/longhaul_VERSION_ARCH.deb.
#
#   packaging/deb/build.sh                   cargo build --release, then package it
#   packaging/deb/build.sh --binary PATH     package this binary instead (tests/packaging.rs uses
#                                            the test build; it is stripped here either way)
#   packaging/deb/build.sh --out DIR         write the .deb into DIR
#
# What goes in, and from where (nothing is written by hand twice):
#   /usr/bin/longhaul                         the binary, stripped
#   /usr/share/man/man1/longhaul*.1.gz        `longhaul generate man`: a page per command, from the
#                                             flag definitions --help prints
#   bash, zsh and fish completions            `longhaul generate completions SHELL`
#   /etc/longhaul/{server,testbed,monitor,agent}.toml
#                                             `longhaul generate config NAME`: every setting with its
#                                             help, commented out at its default (conffiles)
#   /lib/systemd/system/longhaul-*.service    packaging/systemd/
#   /usr/share/doc/longhaul/                  README, docs/, examples (a mesh, an inventory),
#                                             copyright, changelog
#   DEBIAN/{postinst,prerm,postrm}            packaging/deb/: the system user `longhaul`; upgrades
#                                             restart the running services; purge keeps the data
# Dependencies are what dpkg-shlibdeps reads from the binary; the maintainer is DEBFULLNAME <DEBEMAIL>. Checked by lintian
# (packaging/deb/lintian-overrides says why for each tag left) in tests/packaging.rs.
set -euo pipefail
cd "$(dirname "$0")/../.."

binary=
out=target/debian
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) binary="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "packaging/deb/build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for tool in dpkg-deb dpkg-shlibdeps fakeroot gzip strip; do
    command -v "$tool" >/dev/null ||
        { echo "packaging/deb/build.sh: $tool is missing (apt-get install dpkg-dev fakeroot binutils)" >&2; exit 1; }
done
if [ -z "$binary" ]; then
    # The bundled C (SQLite) hardened as Debian builds C; Rust code is bounds-checked.
    export CFLAGS="${CFLAGS:--O2 -D_FORTIFY_SOURCE=2 -fstack-protector-strong}"
    cargo build --release --locked --bin longhaul
    binary=target/release/longhaul
fi
[ -x "$binary" ] || { echo "packaging/deb/build.sh: $binary is not an executable" >&2; exit 1; }

# Who answers for this build: DEBFULLNAME and DEBEMAIL, as dch reads them.
maintainer="${DEBFULLNAME:-longhaul maintainers} <${DEBEMAIL:-longhaul@example.org}>"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
# Reproducible: every timestamp is the commit's (or now, outside git).
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

stage=$(mktemp -d "${TMPDIR:-/tmp}/longhaul-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
umask 022
doc=$stage/usr/share/doc/longhaul

install -D -m 0755 "$binary" "$stage/usr/bin/longhaul"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/longhaul"
bin=$stage/usr/bin/longhaul

# Manual pages and completions, from the flag definitions.
"$bin" generate man "$stage/usr/share/man/man1" >/dev/null
gzip -9n "$stage"/usr/share/man/man1/*.1
install -d "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
    "$stage/usr/share/fish/vendor_completions.d"
"$bin" generate completions bash > "$stage/usr/share/bash-completion/completions/longhaul"
"$bin" generate completions zsh > "$stage/usr/share/zsh/vendor-completions/_longhaul"
"$bin" generate completions fish > "$stage/usr/share/fish/vendor_completions.d/longhaul.fish"

# Configuration files: each daemon's settings, commented out at their defaults.
install -d "$stage/etc/longhaul"
for name in server testbed monitor agent; do
    "$bin" generate config "$name" > "$stage/etc/longhaul/$name.toml"
done

install -d "$stage/lib/systemd/system"
install -m 0644 packaging/systemd/longhaul-*.service "$stage/lib/systemd/system/"

# Documentation. Text over 4 KiB is compressed (Debian policy 12.3); the images stay as they are.
install -d "$doc/docs/img" "$doc/examples"
install -m 0644 README.md "$doc/"
install -m 0644 docs/*.md "$doc/docs/"
install -m 0644 docs/img/*.png "$doc/docs/img/"
install -m 0644 packaging/README.md "$doc/packaging.md"
install -m 0644 packaging/examples/mesh.toml "$doc/examples/mesh.toml"
install -m 0644 crates/testbed/testdata/datatag.toml "$doc/examples/inventory.toml"
install -m 0644 packaging/prometheus/longhaul.rules.yml packaging/grafana/longhaul-monitor.json "$doc/examples/"
find "$doc" -type f \( -name '*.md' -o -name '*.json' -o -name '*.yml' \) -size +4k -exec gzip -9n {} +
install -m 0644 packaging/deb/copyright "$doc/copyright"
date=$(date -R -u -d "@$SOURCE_DATE_EPOCH")
commit=$("$bin" --version | sed -n 's/^commit: //p')
printf 'longhaul (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
    "$version" "${commit:-unknown}" "$maintainer" "$date" | gzip -9n > "$doc/changelog.gz"
install -D -m 0644 packaging/deb/lintian-overrides "$stage/usr/share/lintian/overrides/longhaul"

# Control files.
install -d "$stage/DEBIAN"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$stage/DEBIAN/"
(cd "$stage" && find etc -type f | sort | sed 's|^|/|') > "$stage/DEBIAN/conffiles"
shl=$(mktemp -d)
mkdir "$shl/debian"
printf 'Source: longhaul\n\nPackage: longhaul\nArchitecture: any\n' > "$shl/debian/control"
shlibs=$(cd "$shl" && dpkg-shlibdeps -O "$bin" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
rm -rf "$shl"
[ -n "$shlibs" ] || { echo "packaging/deb/build.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s|@MAINTAINER@|$maintainer|" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$shlibs, adduser/" \
    packaging/deb/control > "$stage/DEBIAN/control"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
    > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"
find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb="$out/longhaul_${version}_${arch}.deb"
fakeroot dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
