// Intrusive doubly linked FIFO list of the engine's pooled objects
// (operations, posted receives, messages): no allocation.
#ifndef DPDK_ENGINE_OPS_LIST_H
#define DPDK_ENGINE_OPS_LIST_H

#include <cstddef>

namespace dpdk_engine {

// Intrusive doubly linked FIFO list.
template <typename T> struct List {
    T* head = nullptr;
    T* tail = nullptr;
    size_t size = 0;
    void push_back(T* x)
    {
        x->next = nullptr;
        x->prev = tail;
        if (tail)
            tail->next = x;
        else
            head = x;
        tail = x;
        size++;
    }
    void remove(T* x)
    {
        if (x->prev)
            x->prev->next = x->next;
        else
            head = x->next;
        if (x->next)
            x->next->prev = x->prev;
        else
            tail = x->prev;
        x->next = x->prev = nullptr;
        size--;
    }
    bool empty() const { return head == nullptr; }
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_OPS_LIST_H
