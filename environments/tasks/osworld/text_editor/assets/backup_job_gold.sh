#!/bin/sh
echo "Starting backup"
rsync -a /data /srv/backup
echo "Done"
