(* T2: homogeneous rescaling, neuron-wise scaling and hidden-unit permutation are
   symmetries of an MLP of ANY depth and ANY widths.

   A network from width i to width o is a list of layers with matching sizes:
     Out W b          : the output layer x |-> W x + b          (no activation)
     Layer W b N      : a hidden layer x |-> N (σ(W x + b)), σ applied entrywise.
   A hidden layer l of a network is reached through a context C (the l layers before it):
   every network with a hidden layer at depth l is  plug C (Layer W_l b_l N), where the first
   weight of N is W_{l+1}.  The theorems quantify over every C, W_l, b_l and N, so they hold
   at every depth, for every width, at every hidden layer.  The proof is an induction over
   the layers of C and one step at layer l; no composition hypothesis is used. *)
From mathcomp Require Import all_ssreflect fingroup perm all_algebra.
From CoupledCurvature Require Import Defs.

Import Order.POrderTheory GRing.Theory Num.Theory.

Section Net.
Variable R : rcfType.

(* net i o: a network from inputs of size i to outputs of size o *)
Inductive net : nat -> nat -> Type :=
| Out : forall i o, 'M[R]_(o, i) -> 'cV[R]_o -> net i o
| Layer : forall i h o, 'M[R]_(h, i) -> 'cV[R]_h -> net h o -> net i o.

(* the layers before a hidden layer: a network with a hole of width h *)
Inductive ctx : nat -> nat -> Type :=
| Hole : forall i, ctx i i
| Pre : forall i h j, 'M[R]_(h, i) -> 'cV[R]_h -> ctx h j -> ctx i j.

Fixpoint plug i j (C : ctx i j) : forall o, net j o -> net i o :=
  match C in ctx i j return forall o, net j o -> net i o with
  | Hole _ => fun o N => N
  | Pre _ _ _ W b C' => fun o N => Layer W b (plug C' N)
  end.

Variable sigma : R -> R.

(* forward pass: σ entrywise after every hidden layer, affine output layer *)
Fixpoint eval i o (N : net i o) : 'cV[R]_i -> 'cV[R]_o :=
  match N in net i o return 'cV[R]_i -> 'cV[R]_o with
  | Out _ _ W b => fun x => W *m x + b
  | Layer _ _ _ W b N' => fun x => eval N' (map_mx sigma (W *m x + b))
  end.

(* forward pass through the layers before the hole *)
Fixpoint evalc i j (C : ctx i j) : 'cV[R]_i -> 'cV[R]_j :=
  match C in ctx i j return 'cV[R]_i -> 'cV[R]_j with
  | Hole _ => fun x => x
  | Pre _ _ _ W b C' => fun x => evalc C' (map_mx sigma (W *m x + b))
  end.

(* replace the first weight W of a network by W *m M (acts on the columns of W_{l+1}) *)
Definition rmul_first i o (M : 'M[R]_i) (N : net i o) : net i o :=
  match N in net i o return 'M[R]_i -> net i o with
  | Out _ _ W b => fun M => Out (W *m M) b
  | Layer _ _ _ W b N' => fun M => Layer (W *m M) b N'
  end M.

(* the transformed hidden layer: rows and bias by D, next layer's columns by E *)
Definition hidden_map i h o (D E : 'M[R]_h) (W : 'M[R]_(h, i)) (b : 'cV[R]_h) (N : net h o) :=
  Layer (D *m W) (D *m b) (rmul_first E N).

Lemma eval_plug i j o (C : ctx i j) (N : net j o) x :
  eval (plug C N) x = eval N (evalc C x).
Proof. by elim: C N x => [//|i' h j' W b C' IH] N x /=; rewrite IH. Qed.

Lemma eval_rmul_first i o (M : 'M[R]_i) (N : net i o) x :
  eval (rmul_first M N) x = eval N (M *m x).
Proof. by case: N M x => [i' o' W b|i' h' o' W b N'] M x /=; rewrite mulmxA. Qed.

(* the one-layer step, for any pair (D, E) that E σ(D z) = σ(z) *)
Lemma hidden_map_eval i h o (D E : 'M[R]_h) (W : 'M[R]_(h, i)) b (N : net h o) :
  (forall z : 'cV[R]_h, E *m map_mx sigma (D *m z) = map_mx sigma z) ->
  forall j (C : ctx j i) x,
  eval (plug C (hidden_map D E W b N)) x = eval (plug C (Layer W b N)) x.
Proof.
move=> DE j C x; rewrite !eval_plug /= eval_rmul_first.
by rewrite -mulmxA -mulmxDr DE.
Qed.

Variable k : nat.
Hypothesis sigma_hom : forall c z : R, 0 < c -> sigma (c * z) = c ^+ k * sigma z.

(* T2 (a): layer-wise rescaling W_l -> c W_l, b_l -> c b_l, W_{l+1} -> c^{-k} W_{l+1} *)
Theorem layer_rescaling_preserves_output :
  forall j i h o (C : ctx j i) (W : 'M[R]_(h, i)) (b : 'cV[R]_h) (N : net h o) (c : R) x,
  0 < c ->
  eval (plug C (Layer (c *: W) (c *: b) (rmul_first ((c ^+ k)^-1)%:M N))) x
  = eval (plug C (Layer W b N)) x.
Proof.
move=> j i h o C W b N c x c0.
have -> : Layer (c *: W) (c *: b) (rmul_first ((c ^+ k)^-1)%:M N)
          = hidden_map c%:M ((c ^+ k)^-1)%:M W b N by rewrite /hidden_map !mul_scalar_mx.
apply: hidden_map_eval => z; rewrite !mul_scalar_mx; apply/matrixP => p q.
have ck0 : c ^+ k != 0 by rewrite expf_neq0 // lt0r_neq0.
by rewrite !mxE sigma_hom // mulrA mulVf // mul1r.
Qed.

(* T2 (b): neuron-wise scaling by a positive vector a:
   W_l -> diag(a) W_l, b_l -> diag(a) b_l, W_{l+1} -> W_{l+1} diag(a)^{-k} *)
Definition pow_inv h (a : 'rV[R]_h) : 'rV[R]_h := map_mx (fun x => (x ^+ k)^-1) a.

Theorem neuron_scaling_preserves_output :
  forall j i h o (C : ctx j i) (W : 'M[R]_(h, i)) (b : 'cV[R]_h) (N : net h o) (a : 'rV[R]_h) x,
  (forall q, 0 < a 0 q) ->
  eval (plug C (Layer (diag_mx a *m W) (diag_mx a *m b) (rmul_first (diag_mx (pow_inv a)) N))) x
  = eval (plug C (Layer W b N)) x.
Proof.
move=> j i h o C W b N a x a0.
apply: (hidden_map_eval (D := diag_mx a)) => z; apply/matrixP => p q.
have ap0 : a 0 p ^+ k != 0 by rewrite expf_neq0 // lt0r_neq0.
by rewrite !mul_diag_mx !mxE sigma_hom // mulrA mulVf // mul1r.
Qed.

(* T2 (c): permutation s of the hidden units: P W_l, P b_l, W_{l+1} Pᵀ (σ arbitrary) *)
Theorem permutation_preserves_output :
  forall j i h o (C : ctx j i) (W : 'M[R]_(h, i)) (b : 'cV[R]_h) (N : net h o) (s : 'S_h) x,
  eval (plug C (Layer (perm_mx s *m W) (perm_mx s *m b) (rmul_first (perm_mx s)^T N))) x
  = eval (plug C (Layer W b N)) x.
Proof.
move=> j i h o C W b N s x.
apply: (hidden_map_eval (D := perm_mx s)) => z.
rewrite -row_permE map_row_perm row_permE mulmxA tr_perm_mx -perm_mxM mulVg perm_mx1.
by rewrite mul1mx.
Qed.

End Net.

(* ---- non-vacuity ---- *)
Section NonVacuity.
Variable R : rcfType.

Definition relu (z : R) : R := Num.max z 0.

(* ReLU is positively homogeneous of degree 1 *)
Lemma relu_hom : forall c z : R, 0 < c -> relu (c * z) = c ^+ 1 * relu z.
Proof.
by move=> c z c0; rewrite expr1 /relu (maxr_pmulr _ _ (ltW c0)) mulr0.
Qed.

(* a concrete 2-layer ReLU net on R^1: x |-> 1 * relu(1 * x + 0) + 0 *)
Definition net2 : net R 1 1 := Layer 1%:M 0 (Out 1%:M 0).

(* its rescaled copy for c = 2: the parameters differ, the output does not *)
Lemma net2_rescaled_same_output (x : 'cV[R]_1) :
  eval relu (plug (@Hole R 1) (Layer (2 *: 1%:M) (2 *: 0) (rmul_first ((2 ^+ 1)^-1)%:M (Out 1%:M 0)))) x
  = eval relu net2 x.
Proof.
by apply: (layer_rescaling_preserves_output relu_hom); rewrite ltr0n.
Qed.

Lemma net2_eval (x : 'cV[R]_1) : eval relu net2 x = map_mx relu x.
Proof. by rewrite /= !mul1mx !addr0. Qed.

(* the rescaled first weight is not the original one: the map moves the parameters *)
Lemma net2_rescaled_weight_differs : (2 *: 1%:M : 'M[R]_1) != 1%:M.
Proof.
apply/eqP => /matrixP /(_ 0 0); rewrite !mxE /= mulr1 => /eqP.
by rewrite (_ : 2 = 1 + 1 :> R) // -subr_eq0 addrK oner_eq0.
Qed.

End NonVacuity.
