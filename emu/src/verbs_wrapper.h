#include <infiniband/verbs.h>
#include <infiniband/manadv.h>
#include <rdma/ib_user_verbs.h>
