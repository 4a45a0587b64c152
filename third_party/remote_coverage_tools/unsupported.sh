#!/bin/sh
echo "coverage is not supported in the offline Sluice build" >&2
exit 1
