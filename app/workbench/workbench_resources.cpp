#include "app/workbench/workbench_resources.h"

#include <QtCore/qglobal.h>

void lazyscope_init_workbench_resources() { Q_INIT_RESOURCE(workbench); }
