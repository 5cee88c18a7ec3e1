#!/usr/bin/env bash
# The device tool brings back at most 8 files from $OUT, no deeper than two folders: a run that
# wrote more loses the rest (the bench_reduce tables of a 2026-12-07 call did). This packs a
# folder's files into DIR/all.tgz, keeping beside it only the Markdown summaries at its top.
# The scripts call it on exit where the device set OUT; a folder of 8 files or fewer is left alone.
# Usage: bash bench/pack_out.sh DIR
set -u
dir=${1:?usage: pack_out.sh DIR}
[ -d "$dir" ] || exit 0
(( $(find "$dir" -type f | wc -l) <= 8 )) && exit 0
archive=$(mktemp -d)/all.tgz
tar -czf "$archive" -C "$dir" . || exit 1
find "$dir" -mindepth 1 -type f ! \( -name '*.md' -path "$dir/*" ! -path "$dir/*/*" \) -delete
find "$dir" -mindepth 1 -type d -empty -delete
mv "$archive" "$dir/all.tgz"
echo "pack_out: $dir's files packed into $dir/all.tgz (the device returns 8 files at most)"
