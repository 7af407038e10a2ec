// Moved to checkpoint/json_bytes.h (issue 22, item 3: the checkpoint library may not include
// tools/); this header keeps `repro`'s include working.
#pragma once

#include "checkpoint/json_bytes.h"
