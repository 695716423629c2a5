# Sourced by the bench-*.sh scripts: sets `bin` to the setwise binary to measure, the
# one in $SETWISE if given (e.g. an older build, to compare back to back), else a fresh
# release build of this tree.
if [ -n "${SETWISE:-}" ]; then
  bin=$(realpath "$SETWISE")
else
  cargo build --release -q -p setwise-cli
  bin=$PWD/target/release/setwise
fi
