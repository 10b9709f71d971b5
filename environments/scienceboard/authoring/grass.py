"""GRASS GIS tasks: raster and vector work in a small generated location, judged by GRASS modules (``db``).

Every task builds ``~/grassdata/demo`` with ``assets/make_location.sh``
(raster ``elevation`` = 200 + 3 row + 2 col on 100 x 100 cells of 50 m;
vector points ``wells`` from ``assets/wells.csv``), starts the GUI in its
PERMANENT mapset and pins the Layer Manager to the top-left corner, so the
oracles can click its Console tab and type modules there.
"""

from __future__ import annotations

import math
from typing import Any

from environments.scienceboard.authoring.common import HOME, answer, click, done, enter, key, stop, task, type_, wait

APP = "GrassGIS"
WORK = f"{HOME}/.scienceboard"
INITIALIZE = [
    {"func": "download", "url": "assets/make_location.sh", "path": f"{WORK}/make_location.sh"},
    {"func": "download", "url": "assets/wells.csv", "path": f"{WORK}/wells.csv"},
    {"func": "execute", "command": f"bash {WORK}/make_location.sh", "shell": True, "check": True},
    {"func": "launch", "command": f"GRASS_PYTHON=/usr/bin/python3 grass --gui {HOME}/grassdata/demo/PERMANENT",
     "shell": True, "window": "PERMANENT - GRASS GIS", "wait": 2},
    {"func": "execute", "shell": True, "wait": 1,
     "command": "xdotool search --onlyvisible --name 'PERMANENT - GRASS GIS' windowmove 0 0 windowsize 640 780"},
]
CONSOLE_TAB = (251, 749)  # the Layer Manager's Console tab, window pinned at (0, 0), 640 x 780

ROWS = COLS = 100
DEPTHS = [12.5, 34.0, 22.0, 41.5, 18.0, 55.0, 29.5, 36.0]
ELEVATION_MEAN = 200 + 3 * (ROWS + 1) / 2 + 2 * (COLS + 1) / 2
ELEVATION_MAX = 200 + 3 * ROWS + 2 * COLS
HIGH_CELLS = sum(1 for r in range(1, ROWS + 1) for c in range(1, COLS + 1) if 200 + 3 * r + 2 * c > 600)
SLOPE_DEGREES = math.degrees(math.atan(math.hypot(3 / 50, 2 / 50)))

LISTED = "lambda out: out.split()"
STAT = "lambda out: float(dict(line.split('=') for line in out.split())['{name}'])"
COUNT = "lambda out: int(dict(line.split('=') for line in out.split())['{name}'])"
NEAR = "lambda key, value: abs(key - value) <= 0.01"


def console(*commands: str, pause: float = 3) -> list[dict[str, Any]]:
    """Type modules into the Console tab's prompt; Escape closes the map-name completer (Enter would accept it)."""
    out: list[dict[str, Any]] = [click(*CONSOLE_TAB), wait(1)]
    for command in commands:
        out += [type_(command), wait(0.3), key("Escape"), enter(), wait(pause)]
    return out


def rasters_include(name: str) -> dict[str, Any]:
    return {"type": "db", "cmd": "g.list", "kwargs": {"type": "raster"}, "key": LISTED, "value": name,
            "pred": "lambda key, value: value in key"}


def univar(raster: str, stat: str, value: float) -> dict[str, Any]:
    return {"type": "db", "cmd": "r.univar", "kwargs": {"flags": "g", "map": raster},
            "key": STAT.format(name=stat), "value": value, "pred": NEAR}


def topology(vector: str, field: str, value: int, pred: str | None = None) -> dict[str, Any]:
    item = {"type": "db", "cmd": "v.info", "kwargs": {"flags": "t", "map": vector},
            "key": COUNT.format(name=field), "value": value}
    if pred:
        item["pred"] = pred
    return item


def tasks() -> list[dict[str, Any]]:
    return [
        task("grass-slope", APP, "In GRASS GIS, compute the slope (in degrees) of the raster 'elevation' into a new "
             "raster named 'slope'.", INITIALIZE, [rasters_include("slope"), univar("slope", "mean", SLOPE_DEGREES)],
             console("r.slope.aspect elevation=elevation slope=slope") + [done()]),
        task("grass-elevation-in-feet", APP, "In GRASS GIS, create a raster 'elev_ft' holding the values of "
             "'elevation' converted from meters to feet (1 m = 3.28084 ft).", INITIALIZE,
             [univar("elev_ft", "mean", ELEVATION_MEAN * 3.28084)],
             console('r.mapcalc expression="elev_ft = elevation * 3.28084"') + [done()]),
        task("grass-high-ground", APP, "In GRASS GIS, create a raster 'high' that is 1 where 'elevation' is above "
             "600 and null everywhere else.", INITIALIZE,
             [univar("high", "n", HIGH_CELLS), univar("high", "mean", 1.0)],
             console('r.mapcalc expression="high = if(elevation > 600, 1, null())"') + [done()]),
        task("grass-buffer-wells", APP, "In GRASS GIS, create buffer areas of 100 m around the points of the vector "
             "map 'wells', as a new vector map named 'wells_buffer'.", INITIALIZE,
             [topology("wells_buffer", "areas", len(DEPTHS))],
             console("v.buffer input=wells output=wells_buffer distance=100") + [done()]),
        task("grass-deep-wells", APP, "In GRASS GIS, extract the wells deeper than 30 m (attribute 'depth') from "
             "the vector map 'wells' into a new vector map named 'deep_wells'.", INITIALIZE,
             [topology("deep_wells", "points", sum(d > 30 for d in DEPTHS))],
             console('v.extract input=wells output=deep_wells where="depth > 30"') + [done()]),
        task("grass-contours", APP, "In GRASS GIS, generate contour lines every 100 m from the raster 'elevation' "
             "into a vector map named 'contours'.", INITIALIZE,
             [topology("contours", "lines", 4, "lambda key, value: key >= value")],
             console("r.contour input=elevation output=contours step=100") + [done()]),
        task("grass-region-resolution", APP, "In GRASS GIS, change the resolution of the current computational "
             "region to 100 m, keeping its extent.", INITIALIZE,
             [{"type": "db", "cmd": "g.region", "kwargs": {"flags": "g"}, "key": STAT.format(name="nsres"),
               "value": 100.0, "pred": NEAR},
              {"type": "db", "cmd": "g.region", "kwargs": {"flags": "g"}, "key": STAT.format(name="ewres"),
               "value": 100.0, "pred": NEAR}],
             console("g.region res=100") + [done()]),
        task("grass-rename-elevation", APP, "In GRASS GIS, rename the raster 'elevation' to 'dem'.", INITIALIZE,
             [rasters_include("dem"),
              {"type": "db", "cmd": "g.list", "kwargs": {"type": "raster"}, "key": LISTED, "value": "elevation",
               "pred": "lambda key, value: value not in key"}],
             console("g.rename raster=elevation,dem") + [done()]),
        task("grass-add-column", APP, "In GRASS GIS, add a text column named 'quality' (varchar of length 10) to "
             "the attribute table of the vector map 'wells'.", INITIALIZE,
             [{"type": "db", "cmd": "db.columns", "kwargs": {"table": "wells"}, "key": LISTED, "value": "quality",
               "pred": "lambda key, value: value in key"}],
             console('v.db.addcolumn map=wells columns="quality varchar(10)"') + [done()]),
        task("grass-univar-mean", APP, "In GRASS GIS, create a constant raster named 'mean_elev' whose every cell "
             "holds the mean value of the raster 'elevation'.", INITIALIZE,
             [univar("mean_elev", "min", ELEVATION_MEAN), univar("mean_elev", "max", ELEVATION_MEAN)],
             console("r.univar map=elevation", f'r.mapcalc expression="mean_elev = {ELEVATION_MEAN}"') + [done()]),
        task("grass-max-elevation-answer", APP, "What is the highest value of the raster 'elevation' in GRASS GIS? "
             "Submit the number as your answer.", INITIALIZE, [stop("ANS", str(ELEVATION_MAX))],
             console("r.univar map=elevation") + [answer(str(ELEVATION_MAX))], steps=8, ans=f"ANS {ELEVATION_MAX}"),
        task("grass-count-wells-answer", APP, "How many points does the vector map 'wells' contain? Use GRASS GIS "
             "and submit the number as your answer.", INITIALIZE, [stop("ANS", str(len(DEPTHS)))],
             console("v.info map=wells") + [answer(str(len(DEPTHS)))], steps=8, ans=f"ANS {len(DEPTHS)}"),
    ]
