(* T5: which ReLU symmetries act inside CO(n) on the per-tensor partition, and the
   layer partition.

   A neuron-wise scaling with positive scales a (this layer, size h) and b (the previous
   layer, size i) acts on W_l as  W |-> diag(a) W diag(b)^{-k}.  On the parameter vector
   vec(W) this is a linear map; its matrix (column convention, as in T1: w |-> A w) is
   vec_action f := (lin_mx f)^T, MathComp's canonical matrix of f on mxvec.  We prove it is
   the diagonal matrix with entry a_r b_s^{-k} at the index of W_rs (the Kronecker product
   diag(b)^{-k} (x) diag(a) up to the order of the vec basis), and that it is conformal iff
   a and b are each uniform.  On b_l the map is diag(a): conformal iff a is uniform.
   Permutations act orthogonally on both (c = 1).  On the layer partition the block of
   layer l+1 maps by diag(c^{-k} I, I), which is not conformal when c^k <> 1. *)
From mathcomp Require Import all_ssreflect fingroup perm all_algebra.
From CoupledCurvature Require Import Defs T02_homogeneous_rescaling.

Import Order.POrderTheory GRing.Theory Num.Theory.

Section T5.
Variable R : rcfType.

(* the matrix of a linear map on h x i matrices, acting on vec(W) as a column vector *)
Definition vec_action h i (f : 'M[R]_(h, i) -> 'M[R]_(h, i)) : 'M[R]_(h * i) := (lin_mx f)^T.

Lemma mxvec_index_inj h i (r r' : 'I_h) (s s' : 'I_i) :
  mxvec_index r s = mxvec_index r' s' -> r = r' /\ s = s'.
Proof. by move/cast_ord_inj/enum_rank_inj => [-> ->]. Qed.

Lemma mxvec_index_eq h i (r r' : 'I_h) (s s' : 'I_i) :
  (mxvec_index r s == mxvec_index r' s') = (r == r') && (s == s').
Proof.
apply/eqP/andP => [/mxvec_index_inj [-> ->] //|[/eqP -> /eqP ->] //].
Qed.

Lemma lin_mx_entry h i (f : 'M[R]_(h, i) -> 'M[R]_(h, i)) r s r' s' :
  lin_mx f (mxvec_index r s) (mxvec_index r' s') = f (delta_mx r s) r' s'.
Proof. by rewrite /lin_mx /lin1_mx mxE /= vec_mx_delta mxvecE. Qed.

(* a diagonal matrix with positive entries is conformal iff its entries are equal *)
Lemma conformal_diag n (d : 'rV[R]_n) :
  (forall p, 0 < d 0 p) -> conformal (diag_mx d) <-> (forall p q, d 0 p = d 0 q).
Proof.
move=> d0; rewrite /conformal tr_diag_mx mulmx_diag; split.
  move=> [c [c0 /matrixP E]] p q.
  have sq p' : d 0 p' = c.
    move: (E p' p'); rewrite !mxE eqxx !mulr1n -expr2 => /eqP.
    by rewrite eqr_expn2 // ?ltW // => /eqP.
  by rewrite !sq.
case: n d d0 => [|n] d d0 E.
  by exists 1; split; [exact: ltr01 | apply/matrixP => -[]].
exists (d 0 ord0); split => //; apply/matrixP => p q.
by rewrite !mxE (E p ord0) -expr2.
Qed.

Variable k : nat.

(* the neuron-wise scaling on W_l: rows by a, columns by b^{-k} *)
Definition neuron_map h i (a : 'rV[R]_h) (b : 'rV[R]_i) (W : 'M[R]_(h, i)) : 'M[R]_(h, i) :=
  diag_mx a *m W *m diag_mx (pow_inv k b).

(* its vec matrix is diagonal, with entry a_r b_s^{-k} at the index of W_rs *)
Definition scale_entries h i (a : 'rV[R]_h) (b : 'rV[R]_i) : 'M[R]_(h, i) :=
  \matrix_(r, s) (a 0 r * (b 0 s ^+ k)^-1).

Lemma neuron_map_entries h i (a : 'rV[R]_h) (b : 'rV[R]_i) W r s :
  neuron_map a b W r s = scale_entries a b r s * W r s.
Proof. by rewrite /neuron_map mul_mx_diag mul_diag_mx !mxE mulrAC. Qed.

Lemma vec_action_neuron_map h i (a : 'rV[R]_h) (b : 'rV[R]_i) :
  vec_action (neuron_map a b) = diag_mx (mxvec (scale_entries a b)).
Proof.
rewrite /vec_action -[diag_mx _]trmxK tr_diag_mx; congr (_^T).
apply/matrixP => p q; case/mxvec_indexP: p => r s; case/mxvec_indexP: q => r' s'.
rewrite lin_mx_entry neuron_map_entries !mxE mxvecE !mxE mxvec_index_eq (eq_sym r') (eq_sym s').
by case: andP => [[/eqP <- /eqP <-]|_]; rewrite ?mulr1 ?mulr1n ?mulr0 ?mulr0n.
Qed.

(* faithfulness of vec_action: it maps vec(W) to vec(f W) *)
Lemma vec_action_neuron_mapE h i (a : 'rV[R]_h) (b : 'rV[R]_i) W :
  vec_action (neuron_map a b) *m (mxvec W)^T = (mxvec (neuron_map a b W))^T.
Proof.
rewrite vec_action_neuron_map -tr_diag_mx -trmx_mul; congr (_^T).
apply/rowP => p; case/mxvec_indexP: p => r s.
by rewrite mul_mx_diag mxE !mxvecE neuron_map_entries mulrC.
Qed.

(* T5, weight tensor: the vec action of a positive neuron-wise scaling is conformal iff
   both scale vectors are uniform *)
Theorem neuron_scaling_W_conformal_iff h i (a : 'rV[R]_h) (b : 'rV[R]_i) :
  (0 < k)%N -> (0 < h)%N -> (0 < i)%N ->
  (forall r, 0 < a 0 r) -> (forall s, 0 < b 0 s) ->
  conformal (vec_action (neuron_map a b)) <->
  (forall r r', a 0 r = a 0 r') /\ (forall s s', b 0 s = b 0 s').
Proof.
move=> k0 h0 i0 a0 b0.
have bk0 s : 0 < (b 0 s ^+ k)^-1 by rewrite invr_gt0 exprn_gt0.
have S0 p : 0 < mxvec (scale_entries a b) 0 p.
  by case/mxvec_indexP: p => r s; rewrite mxvecE mxE mulr_gt0.
rewrite vec_action_neuron_map conformal_diag //.
have E r s r' s' : (mxvec (scale_entries a b) 0 (mxvec_index r s)
                   = mxvec (scale_entries a b) 0 (mxvec_index r' s'))
                 = (a 0 r * (b 0 s ^+ k)^-1 = a 0 r' * (b 0 s' ^+ k)^-1).
  by rewrite !mxvecE !mxE.
split.
- move=> U; split.
    move=> r r'; move: (U (mxvec_index r (Ordinal i0)) (mxvec_index r' (Ordinal i0))).
    by rewrite E => /mulIf; apply; rewrite lt0r_neq0.
  move=> s s'; move: (U (mxvec_index (Ordinal h0) s) (mxvec_index (Ordinal h0) s')).
  rewrite E => /(mulfI (lt0r_neq0 (a0 _))) /invr_inj /eqP.
  by rewrite eqr_expn2 // ?ltW // => /eqP.
- move=> [Ua Ub] p q; case/mxvec_indexP: p => r s; case/mxvec_indexP: q => r' s'.
  by rewrite E (Ua r r') (Ub s s').
Qed.

(* T5, bias tensor: b_l |-> diag(a) b_l is conformal iff a is uniform *)
Theorem neuron_scaling_b_conformal_iff h (a : 'rV[R]_h) :
  (forall r, 0 < a 0 r) ->
  conformal (diag_mx a) <-> (forall r r', a 0 r = a 0 r').
Proof. exact: conformal_diag. Qed.

(* T5, permutations: orthogonal (conformal with c = 1) on the bias ... *)
Theorem permutation_b_orthogonal h (s : 'S_h) :
  (perm_mx s)^T *m perm_mx s = 1%:M :> 'M[R]_h.
Proof. by rewrite tr_perm_mx -perm_mxM mulVg perm_mx1. Qed.

Corollary permutation_b_conformal h (s : 'S_h) : conformal (perm_mx s : 'M[R]_h).
Proof. by exists 1; split; [exact: ltr01 | rewrite permutation_b_orthogonal expr1n]. Qed.

(* ... and on the weight: W |-> P_s W P_tᵀ (s this layer's, t the previous layer's) *)
Definition perm_map h i (s : 'S_h) (t : 'S_i) (W : 'M[R]_(h, i)) : 'M[R]_(h, i) :=
  perm_mx s *m W *m (perm_mx t)^T.

Lemma perm_map_entries h i (s : 'S_h) (t : 'S_i) W r u :
  perm_map s t W r u = W (s r) (t u).
Proof.
by rewrite /perm_map tr_perm_mx -col_permE -row_permE !mxE.
Qed.

Lemma lin_mx_perm_map h i (s : 'S_h) (t : 'S_i) p r u :
  lin_mx (perm_map s t) p (mxvec_index r u) = (p == mxvec_index (s r) (t u))%:R.
Proof.
case/mxvec_indexP: p => r' u'.
by rewrite lin_mx_entry perm_map_entries mxE mxvec_index_eq (eq_sym r') (eq_sym u').
Qed.

Theorem permutation_W_orthogonal h i (s : 'S_h) (t : 'S_i) :
  (vec_action (perm_map s t))^T *m vec_action (perm_map s t) = 1%:M.
Proof.
rewrite /vec_action trmxK; apply: mulmx1C; apply/matrixP => p q.
case/mxvec_indexP: p => r u; case/mxvec_indexP: q => r' u'.
rewrite [RHS]mxE [LHS]mxE (bigD1 (mxvec_index (s r) (t u))) //= big1 ?addr0.
  rewrite !mxE /= vec_mx_delta !mxvecE !perm_map_entries !mxE !eqxx mul1r.
  by rewrite !(inj_eq perm_inj) mxvec_index_eq (eq_sym r') (eq_sym u').
move=> p /negbTE pn; rewrite !mxE.
case/mxvec_indexP: p pn => r2 u2 pn.
rewrite /= vec_mx_delta !mxvecE !perm_map_entries !mxE.
suff -> : (s r == r2) && (t u == u2) = false by rewrite mul0r.
by rewrite -mxvec_index_eq eq_sym pn.
Qed.

Corollary permutation_W_conformal h i (s : 'S_h) (t : 'S_i) :
  conformal (vec_action (perm_map s t)).
Proof. by exists 1; split; [exact: ltr01 | rewrite permutation_W_orthogonal expr1n]. Qed.

(* T5, layer partition: the block (vec W_{l+1}, b_{l+1}) of the layer after a rescaled
   layer maps by diag(c^{-k} I, I): not conformal unless c^k = 1 *)
Definition layer_block_map m p (c : R) : 'M[R]_(m + p) :=
  block_mx ((c ^+ k)^-1)%:M 0 0 1%:M.

Theorem layer_partition_not_conformal m p (c : R) :
  (0 < m)%N -> (0 < p)%N -> 0 < c -> c ^+ k != 1 ->
  ~ conformal (layer_block_map m p c).
Proof.
move=> m0 p0 c0 ck [d [d0 E]].
move: E; rewrite /layer_block_map tr_block_mx !trmx0 !tr_scalar_mx mulmx_block.
rewrite !mulmx0 !mul0mx !addr0 !add0r mul1mx scalar_mx_block -scalar_mxM.
move/eq_block_mx => [E1 _ _ E2].
have e1 := congr1 (fun M : 'M[R]_m => M (Ordinal m0) (Ordinal m0)) E1.
have e2 := congr1 (fun M : 'M[R]_p => M (Ordinal p0) (Ordinal p0)) E2.
move: e1 e2 => /=; rewrite !mxE !eqxx !mulr1n => e1 e2.
move: e1; rewrite -e2 -invfM -expr2 => /(congr1 GRing.inv); rewrite invrK invr1 => /eqP.
rewrite -[X in _ == X](expr1n R 2) eqr_expn2 // ?exprn_ge0 ?ltW //.
  by rewrite (negbTE ck).
exact: ltr01.
Qed.

(* and it is conformal when c^k = 1 (so the hypothesis is the exact condition) *)
Lemma layer_partition_conformal_if m p (c : R) :
  c ^+ k = 1 -> conformal (layer_block_map m p c).
Proof.
move=> ck; exists 1; split; first exact: ltr01.
rewrite /layer_block_map ck invr1 -scalar_mx_block tr_scalar_mx mulmx1 expr1n //.
Qed.

End T5.

(* ---- non-vacuity ---- *)
Section NonVacuity.
Variable R : rcfType.

(* uniform positive scales satisfy the hypotheses, and the conclusion holds *)
Lemma T5_uniform_instance :
  conformal (vec_action (neuron_map 1 (const_mx 2 : 'rV[R]_2) (const_mx 3 : 'rV[R]_2))).
Proof.
apply/(neuron_scaling_W_conformal_iff (k := 1)) => //.
- by move=> r; rewrite mxE ltr0n.
- by move=> s; rewrite mxE ltr0n.
- by split=> ? ?; rewrite !mxE.
Qed.

(* a non-uniform positive a on a 2-wide layer: not conformal *)
Lemma T5_nonuniform_instance :
  ~ conformal (vec_action (neuron_map 1 (\row_j (j%:R + 1) : 'rV[R]_2) (const_mx 1 : 'rV[R]_1))).
Proof.
move/(neuron_scaling_W_conformal_iff (k := 1)) => H.
have [] := H isT isT isT.
- by move=> r; rewrite mxE ltr_paddl // ?ler0n // ltr01.
- by move=> s; rewrite mxE ltr01.
move=> /(_ ord0 (Ordinal (isT : (1 < 2)%N))) /eqP; rewrite !mxE /= add0r.
by rewrite eq_sym -subr_eq0 addrK oner_eq0.
Qed.

(* the layer partition with k = 1, c = 2, blocks of sizes 1 and 1 *)
Lemma T5_layer_instance : ~ conformal (layer_block_map 1 1 1 (2 : R)).
Proof.
apply: layer_partition_not_conformal => //; first by rewrite ltr0n.
by rewrite expr1 (_ : 2 = 1 + 1 :> R) // -subr_eq0 addrK oner_eq0.
Qed.

End NonVacuity.
