#pragma once
#include <tenet/backend/run.hpp>
