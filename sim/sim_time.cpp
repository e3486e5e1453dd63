#include "sim/sim_time.hpp"
