#!/bin/bash
# Builds the GRASS location the GrassGIS tasks work in: ~/grassdata/demo (UTM zone 33N), PERMANENT mapset.
#   elevation  raster, 100 x 100 cells of 50 m: 200 + 3*row + 2*col (205 .. 700 m)
#   wells      vector points (8) with attributes id, x, y, depth, from wells.csv beside this script
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# GUI language "en": on systems with only the C.UTF-8 locale GRASS then runs the GUI in C instead of asking wx
# for en_US (absent), which would pop up a "Cannot set locale" warning over the window
mkdir -p "$HOME/.grass8"
echo '{"language": {"locale": {"lc_all": "en"}}}' > "$HOME/.grass8/wx.json"
db="$HOME/grassdata"
rm -rf "$db/demo"
mkdir -p "$db"
grass -c EPSG:32633 -e "$db/demo"
grass "$db/demo/PERMANENT" --exec bash -c "
  set -e
  g.region n=5000 s=0 e=5000 w=0 res=50 -s
  r.mapcalc --quiet expression='elevation = 200 + 3 * row() + 2 * col()'
  v.in.ascii --quiet input='$here/wells.csv' output=wells separator=comma skip=1 x=2 y=3 \
    columns='id integer, x double precision, y double precision, depth double precision'
"
