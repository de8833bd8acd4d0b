#!/usr/bin/env bash
# Pins the Dockerfile's base images by digest, or checks that they are.
#
#   deploy/pin-images.sh           resolve each FROM image:tag (any old
#                                  digest dropped) to the digest the
#                                  registry serves for it now, and write
#                                  FROM image:tag@sha256:<digest>
#   deploy/pin-images.sh --check   fail unless every FROM that is not
#                                  scratch or an earlier stage carries a
#                                  digest that the registry serves
#
# The digest is the image index's (the multi-platform list), so one pin
# holds for every platform. Needs `docker buildx imagetools` (Docker 23 or
# later; no daemon) and the registry; review the diff and commit it. Run it
# again to move to a newer patch release: bump the tag, then run it.
set -euo pipefail
cd "$(dirname "$0")/.."
file=${DOCKERFILE:-Dockerfile}
mode=pin
case "${1:-}" in
"") ;;
--check) mode=check ;;
*)
	echo "usage: $0 [--check]" >&2
	exit 2
	;;
esac

# digest_of prints the index digest the registry serves for $1.
digest_of() {
	docker buildx imagetools inspect --format '{{.Manifest.Digest}}' "$1"
}

stages=" scratch "
fail=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
while IFS= read -r line; do
	if [[ $line =~ ^FROM[[:space:]]+([^[:space:]]+)([[:space:]]+[Aa][Ss][[:space:]]+([^[:space:]]+))?(.*)$ ]]; then
		ref=${BASH_REMATCH[1]} stage=${BASH_REMATCH[3]} rest=${BASH_REMATCH[4]}
		if [[ $stages != *" $ref "* ]]; then
			name=${ref%@*}
			if [ "$mode" = check ]; then
				if [[ $ref != *@sha256:* ]]; then
					echo "$file: FROM $ref has no digest; run deploy/pin-images.sh and commit the result" >&2
					fail=1
				elif ! digest_of "$ref" >/dev/null; then
					echo "$file: FROM $ref: the registry does not serve that digest" >&2
					fail=1
				fi
			else
				digest=$(digest_of "$name")
				[[ $digest == sha256:* ]] || {
					echo "$name: no digest from the registry (got '$digest')" >&2
					exit 1
				}
				echo "$name -> $digest" >&2
				line="FROM $name@$digest${stage:+ AS $stage}$rest"
			fi
		fi
		[ -n "$stage" ] && stages+="$stage "
	fi
	printf '%s\n' "$line" >>"$tmp"
done <"$file"
if [ "$mode" = pin ]; then
	cat "$tmp" >"$file"
fi
exit "$fail"
