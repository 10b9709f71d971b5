#!/bin/sh
echo "Starting backup"
rsync -a /data /mnt/backup
echo "Done"
