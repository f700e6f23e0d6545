//! The `inet yolo` table as typed `nftables` values. Pure: applying it is the guard's job.
