# Sourced by scripts/fresh_container.sh and tests/deploy/compose_test.sh:
# podman with all its state in one folder, and the debian:bookworm base
# image built locally with debootstrap (no registry is reachable on these
# machines; ../shared/notes/containers.md).

# Writes podman's configuration for state folder $1 (created; made
# absolute in FLOTILLA_PODMAN_STATE) and exports it: the VMs need the
# ulimits and runc.
flotilla_podman_state() {
  mkdir -p "$1"
  FLOTILLA_PODMAN_STATE="$(cd "$1" && pwd)"
  local d="${FLOTILLA_PODMAN_STATE}"
  cat >"${d}/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[network]
network_config_dir = "${d}/networks"
[engine]
runtime = "runc"
tmp_dir = "${d}/tmp"
volume_path = "${d}/volumes"
static_dir = "${d}/graph/libpod"
CONF
  cat >"${d}/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "${d}/graph"
runroot = "${d}/run"
CONF
  export CONTAINERS_CONF="${d}/containers.conf"
  export CONTAINERS_STORAGE_CONF="${d}/storage.conf"
}

# Builds image $1 (docker.io/library/debian:bookworm) with debootstrap
# when podman does not have it yet; $2 names the caller in messages.
flotilla_base_image() {
  local image="$1" who="$2" d="${FLOTILLA_PODMAN_STATE}"
  podman image exists "${image}" 2>/dev/null && return 0
  echo "${who}: building ${image} with debootstrap (once)"
  rm -rf "${d}/rootfs"
  if ! debootstrap --variant=minbase bookworm "${d}/rootfs" \
      >"${d}/debootstrap.log" 2>&1; then
    tail -20 "${d}/debootstrap.log" >&2
    echo "${who}: debootstrap failed (log above)" >&2
    return 1
  fi
  tar -C "${d}/rootfs" -c . | podman import - "${image}" >/dev/null
  rm -rf "${d}/rootfs"
}
